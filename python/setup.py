# setup.py — only to record where the package was built from: the
# installed tdsl/_origin.py names the source tree, so that tdsl finds
# SOURCE/build/tdslc when neither $TDSLC nor PATH gives one.  Metadata is
# in pyproject.toml.
import os

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithOrigin(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        target = os.path.join(self.build_lib, "tdsl", "_origin.py")
        with open(target, "w") as f:
            f.write("# Written by setup.py: the tdsl source tree this was built from.\n")
            f.write("SOURCE_DIR = %r\n" % os.path.dirname(here))


setup(cmdclass={"build_py": BuildPyWithOrigin})
