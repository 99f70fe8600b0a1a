"""neardup's exceptions: one class per status code of the C++ library
(include/neardup/util/status.h), used for in-process errors and for the
service's error answers alike."""

import re

from . import _core


class Error(Exception):
    """A failed neardup call: `code` (the C++ Status code number), `code_name`
    (e.g. "InvalidArgument"), `message`, and for the service client the
    answer's `http_status` (None in process)."""

    code_name = "Error"
    code = 0
    __module__ = "neardup"

    def __init__(self, message, http_status=None):
        super().__init__(f"{self.code_name}: {message}")
        self.message = message
        self.http_status = http_status


# Python's own exception beside ours, where a caller would reach for it.
_ALSO = {"InvalidArgument": ValueError, "NotFound": LookupError}

_BY_CODE = {}
for _code, _name in _core.STATUS_CODES:
    _cls = type(_name, (Error, _ALSO[_name]) if _name in _ALSO else (Error,),
                {"code": _code, "code_name": _name, "__module__": "neardup"})
    _BY_CODE[_code] = _cls
    globals()[_name] = _cls


def _snake(name):
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


# The service's error codes are the same names in snake case ("not_found").
_BY_HTTP_NAME = {_snake(c.code_name): c for c in _BY_CODE.values()}


def from_status(code, message):
    """The exception for a C++ Status (called by neardup._core)."""
    return _BY_CODE.get(code, Error)(message)


def from_http(http_status, code_name, message):
    """The exception for a service error answer {"error": {"code", "message"}}."""
    return _BY_HTTP_NAME.get(code_name, Error)(message, http_status)


__all__ = ["Error"] + [c.code_name for c in _BY_CODE.values()]
