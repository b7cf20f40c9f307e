{{/*
The prefix of every object's name: deploy/'s names (taint-eviction-controller,
taint-eviction-controller-metrics, -policy, ...) whatever the release is called, since one
controller runs per cluster. fullnameOverride, else nameOverride, replaces it; the controller's
flags, the Role's resourceNames, the ServiceMonitor and NOTES.txt follow. The label
app.kubernetes.io/name stays taint-eviction-controller: the ServiceMonitor takes the job from
it, and every alert and the dashboard select job="taint-eviction-controller".
*/}}
{{- define "tec.fullname" -}}
{{- .Values.fullnameOverride | default .Values.nameOverride | default "taint-eviction-controller" -}}
{{- end -}}

{{/* True (non-empty) when the names are not the controller's and the plugin's defaults. */}}
{{- define "tec.renamed" -}}
{{- if ne (include "tec.fullname" .) "taint-eviction-controller" }}true{{ end -}}
{{- end -}}

{{/* Helm's labels on every object's metadata (never in selectors: those stay deploy/'s). */}}
{{- define "tec.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The controller pods' labels: the Deployment's selector, the Service's, the PDB's. */}}
{{- define "tec.selectorLabels" -}}
app.kubernetes.io/name: taint-eviction-controller
app.kubernetes.io/component: controller
{{- end -}}

{{- define "tec.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
The policy file: the value `policy`, with apiVersion and kind unless it sets them, as the
ConfigMap carries it and the pre-install/pre-upgrade check (policy-check.yaml) hands it to
--check-policy.
*/}}
{{- define "tec.policyText" -}}
{{- $p := .Values.policy | default dict -}}
{{- toYaml (dict "apiVersion" (get $p "apiVersion" | default "taint-eviction-controller/v1alpha1")) }}
{{ toYaml (dict "kind" (get $p "kind" | default "EvictionPolicy")) }}
{{- with omit $p "apiVersion" "kind" }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The pods' and containers' securityContext: the "restricted" Pod Security Standard, as the
image's user (deploy/Dockerfile's 65532). The controller's and the policy check's.
*/}}
{{- define "tec.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "tec.containerSecurityContext" -}}
{{ include "tec.podSecurityContext" . }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* Values that only make sense together; fails the render on the first that does not. */}}
{{- define "tec.checkValues" -}}
{{- $sa := .Values.monitoring.prometheus.serviceAccount -}}
{{- if and $sa.name (not $sa.namespace) -}}
{{- fail "monitoring.prometheus.serviceAccount.name needs monitoring.prometheus.serviceAccount.namespace (the namespace Prometheus runs in)" -}}
{{- end -}}
{{- if and $sa.namespace (not $sa.name) -}}
{{- fail "monitoring.prometheus.serviceAccount.namespace needs monitoring.prometheus.serviceAccount.name (the ServiceAccount Prometheus runs as)" -}}
{{- end -}}
{{- /*
freshNodeCheck is the only way to turn the fresh check on: it also grants `get` on nodes,
without which every check is refused (403). Any spelling of the flag in extraArgs (=false
included), and its environment variable, are refused.
*/ -}}
{{- range .Values.extraArgs -}}
{{- if regexMatch "^--?fresh-node-check(=.*)?$" . -}}
{{- fail (printf "extraArgs: %q: set freshNodeCheck: true instead (it also grants get on nodes, which the check needs)" .) -}}
{{- end -}}
{{- end -}}
{{- range .Values.extraEnv -}}
{{- if eq (toString .name) "TEC_FRESH_NODE_CHECK" -}}
{{- fail "extraEnv: TEC_FRESH_NODE_CHECK: set freshNodeCheck: true instead (it also grants get on nodes, which the check needs)" -}}
{{- end -}}
{{- end -}}
{{- /* A flag given by a value and again in extraArgs stops the controller (exit 2). */ -}}
{{- $given := dict
  "logging.verbosity" (list (ne (int .Values.logging.verbosity) 0) "^--?(v|log-level)(=.*)?$|^-v[0-9]*$")
  "logging.format" (list (ne .Values.logging.format "text") "^--?(logging-format|log-format)(=.*)?$")
  "shadow" (list .Values.shadow "^--?shadow(=.*)?$") -}}
{{- range $value, $v := $given -}}
{{- if index $v 0 -}}
{{- range $.Values.extraArgs -}}
{{- if regexMatch (index $v 1) . -}}
{{- fail (printf "extraArgs: %q sets what %s already sets: give one of them" . $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $k, $_ := .Values.podLabels -}}
{{- if has $k (list "app.kubernetes.io/name" "app.kubernetes.io/component") -}}
{{- fail (printf "podLabels: %s is the Deployment's selector and cannot be changed" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The pods' tolerations: deploy/deployment.yaml's three (its comments say why: not-ready and
unreachable for 300 s, written out; the control plane's NoSchedule), then the value
`tolerations`, without the ones already there (a values file that repeats the chart's gets the
same pods).
*/}}
{{- define "tec.tolerations" -}}
{{- $all := list
  (dict "key" "node.kubernetes.io/not-ready" "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" 300)
  (dict "key" "node.kubernetes.io/unreachable" "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" 300)
  (dict "key" "node-role.kubernetes.io/control-plane" "operator" "Exists" "effect" "NoSchedule") -}}
{{- $seen := list -}}
{{- range $all -}}
{{- $seen = append $seen (toJson .) -}}
{{- end -}}
{{- range .Values.tolerations -}}
{{- if not (has (toJson .) $seen) -}}
{{- $all = append $all . -}}
{{- $seen = append $seen (toJson .) -}}
{{- end -}}
{{- end -}}
{{- toYaml $all -}}
{{- end -}}

{{/*
The pods' affinity: the value `affinity`, with the chart's hostname anti-affinity between the
replicas (required, or preferred with requireReplicasOnDifferentNodes: false) put first in its
podAntiAffinity.
*/}}
{{- define "tec.affinity" -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (fromYaml (include "tec.selectorLabels" .))) -}}
{{- $own := dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term) -}}
{{- if not .Values.requireReplicasOnDifferentNodes -}}
{{- $own = dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term)) -}}
{{- end -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- $anti := $affinity.podAntiAffinity | default dict -}}
{{- range $k, $terms := $own -}}
{{- $_ := set $anti $k (concat $terms (get $anti $k | default list)) -}}
{{- end -}}
{{- $_ := set $affinity "podAntiAffinity" $anti -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/*
The values added after 0.1.0, filled in where they are missing: `helm upgrade --reuse-values`
from an older release renders with that release's values.yaml, which lacks them (a template
would fail on the nil map). Only missing keys are filled; included first by every template that
reads one of them.
*/}}
{{- define "tec.defaults" -}}
{{- $_ := merge .Values (dict
  "logging" (dict "format" "text" "verbosity" 0)
  "serviceAccount" (dict "annotations" (dict))
  "networkPolicy" (dict "metricsFrom" (list) "controlPlane" (dict "cidrs" (list) "namespaceSelector" (dict)))
  "monitoring" (dict "prometheus" (dict "serviceAccount" (dict "name" "" "namespace" "")))) -}}
{{- end -}}
