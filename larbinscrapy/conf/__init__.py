"""Settings: every default with its type and range, the start-up check, larbin.conf.

Owns the one declaration of each setting (``defaults``) and what a wrong value says (``check``).
"""
