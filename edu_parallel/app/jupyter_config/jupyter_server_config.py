"""Jupyter Server's config for ``edu-parallel lab`` (this folder is first on the lab's
``JUPYTER_CONFIG_PATH``; see ``app/lab_quiet.py``): one expected line is kept out of the terminal.

Jupyter Server hands tornado its websocket keep-alive times in milliseconds (30000 and 90000),
tornado 6.5 reads them as seconds and warns once that the timeout is longer than the interval.
The pings run as Jupyter means them; only that warning is dropped.
"""

import logging


class _PingUnits(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not ("websocket_ping_timeout" in text and "cannot be longer" in text)


logging.getLogger("tornado.general").addFilter(_PingUnits())
