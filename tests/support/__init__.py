"""Helpers any test folder can import (``from support.live_http import call``): servers run
under hypercorn, raw ASGI and HTTP peers, task and store builders. Nothing here is collected."""
