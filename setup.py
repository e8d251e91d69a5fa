# scrapyd-deploy builds an egg with `setup.py bdist_egg`; everything else is in pyproject.toml.
# Seeds files in larbinscrapy/seedlists/ ship in the egg, for a scrapyd host to read them with
# `-d seeds=package:larbinscrapy/seedlists/FILE` (docs/scrapyd.md). The status page's HTML, CSS
# and JS (larbinscrapy/status/assets/) ship too: the page is on by default.
from setuptools import setup

setup(package_data={"larbinscrapy": ["seedlists/*.txt"], "larbinscrapy.status": ["assets/*"]})
