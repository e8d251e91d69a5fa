# scrapyd-deploy builds an egg with `setup.py bdist_egg`; everything else is in pyproject.toml.
from setuptools import setup

setup()
