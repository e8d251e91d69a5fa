"""larbinscrapy's Scrapy commands (``COMMANDS_MODULE``): ``scrapy addurls``."""
