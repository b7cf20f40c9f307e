#!/usr/bin/env python3
"""scripts/lint.py's unit key: what changes it and what does not.

A unit whose text is the same keeps its key; a project header's text, an unowned system
header's text, or a new upstream release (major or minor) of the package owning a system header
changes it; a new Debian revision or upstream patch level of that package (a security or patch
update) does not.
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import lint  # noqa: E402


class FakePackages(lint.DebianPackages):
    def __init__(self, owner, versions):
        super().__init__(info="/nonexistent")
        self.owner_map, self.versions = owner, versions

    def _load(self):
        self.owner = dict(self.owner_map)
        self.version = {p: lint.release_of(v) for p, v in self.versions.items()}


class KeyTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        top = os.path.realpath(self.dir.name)
        self.root = os.path.join(top, "repo")
        self.build = os.path.join(self.root, "build")
        self.sys = os.path.join(top, "usr", "include")
        for d in (self.build, os.path.join(self.root, "src"), self.sys):
            os.makedirs(d)
        self.write(os.path.join(self.root, "src", "a.cpp"), "int main() {}\n")
        self.write(os.path.join(self.root, "src", "a.hpp"), "#pragma once\n")
        self.boost = os.path.join(self.sys, "boost.hpp")
        self.write(self.boost, "// boost 1.81.0-5\n")
        self.loose = os.path.join(self.sys, "loose.hpp")
        self.write(self.loose, "// no package\n")
        self.entry = {"directory": self.build, "file": "../src/a.cpp",
                      "command": f"c++ -I{self.root}/src -o src/a.o -c {self.root}/src/a.cpp",
                      "output": "src/a.o"}
        self.deps = {"src/a.o": ["../src/a.hpp", self.boost, self.loose]}

    def tearDown(self):
        self.dir.cleanup()

    @staticmethod
    def write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def key(self, version="1.81.0-5"):
        packages = FakePackages({self.boost: "libboost1.81-dev:amd64"},
                                {"libboost1.81-dev:amd64": version})
        return lint.unit_key(self.entry, self.deps, self.root, self.build, b"tidy 14\0", {}, packages)

    def test_same_text_same_key(self):
        self.assertIsNotNone(self.key())
        self.assertEqual(self.key(), self.key())

    def test_debian_revision_keeps_the_key(self):
        before = self.key("1.81.0-5")
        self.write(self.boost, "// boost 1.81.0-5+deb12u1: a security fix\n")
        self.assertEqual(before, self.key("1.81.0-5+deb12u1"))

    def test_upstream_patch_level_keeps_the_key(self):
        # As linux-libc-dev 6.1.158 -> 6.1.192 or libssl-dev 3.0.17 -> 3.0.22.
        self.assertEqual(self.key("1.81.0-5"), self.key("1.81.2-1~deb12u1"))
        self.assertEqual(self.key("1:1.81.0-5"), self.key("1.81.0+ds-7"))

    def test_upstream_release_changes_the_key(self):
        self.assertNotEqual(self.key("1.81.0-5"), self.key("1.83.0-2"))
        self.assertNotEqual(self.key("1.81.0-5"), self.key("2.81.0-5"))

    def test_release_of(self):
        for version, release in [("1:14.0.6-12", "14.0"), ("3.0.22-1~deb12u2", "3.0"),
                                 ("1.10.0+ds-0.4", "1.10"), ("6.1.192-3", "6.1"),
                                 ("2.36-9+deb12u14", "2.36"), ("20230311", "20230311")]:
            self.assertEqual(lint.release_of(version), release, version)

    def test_project_header_text_changes_the_key(self):
        before = self.key()
        self.write(os.path.join(self.root, "src", "a.hpp"), "#pragma once\nint x;\n")
        self.assertNotEqual(before, self.key())

    def test_unowned_system_header_text_changes_the_key(self):
        before = self.key()
        self.write(self.loose, "// no package, edited\n")
        self.assertNotEqual(before, self.key())

    def test_missing_dependency_has_no_key(self):
        os.remove(self.loose)
        self.assertIsNone(self.key())

    def test_no_dependency_record_has_no_key(self):
        self.deps = {}
        self.assertIsNone(self.key())

    def test_real_packages_own_the_standard_headers(self):
        # On this Debian machine: <vector> belongs to libstdc++'s -dev package.
        vector = "/usr/include/c++/12/vector"
        if not os.path.exists(vector):
            self.skipTest("no GCC 12 headers here")
        identity = lint.DebianPackages().identity(vector)
        self.assertIsNotNone(identity)
        self.assertIn(b"libstdc++-12-dev", identity)


if __name__ == "__main__":
    unittest.main()
