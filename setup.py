# scrapyd-deploy builds an egg with `setup.py bdist_egg`; everything else is in pyproject.toml.
# Seeds files in larbinscrapy/seedlists/ ship in the egg: `-d seeds=package:larbinscrapy/seedlists/FILE`
# is how a scrapyd host reads seeds that live with the code (docs/scrapyd.md).
from setuptools import setup

setup(package_data={"larbinscrapy": ["seedlists/*.txt"]})
