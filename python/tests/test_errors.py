"""The exceptions carry the C++ status codes of include/neardup/util/status.h,
and the stub names every one."""

import pathlib
import re

import neardup


def test_codes_follow_status_h(root):
    text = (root / "include" / "neardup" / "util" / "status.h").read_text()
    enum = re.search(r"enum class Code : int \{(.*?)\};", text, re.S).group(1)
    names = [n[1:] for n in re.findall(r"\b(k[A-Z]\w*)", enum)]
    assert names[0] == "Ok"
    for code, name in enumerate(names[1:], start=1):
        cls = getattr(neardup, name)
        assert issubclass(cls, neardup.Error) and (cls.code, cls.code_name) == (code, name)


def test_stub_declares_the_api():
    stub = (pathlib.Path(neardup.__file__).parent / "__init__.pyi").read_text()
    for name in neardup.__all__:
        assert re.search(rf"^(class|def) {name}\b", stub, re.M), name


def test_an_error_has_code_and_message():
    try:
        neardup.Index().search(0, 65)
    except neardup.Error as e:
        assert (e.code_name, e.code, e.http_status) == ("InvalidArgument", 1, None)
        assert e.message and str(e).startswith("InvalidArgument: ")
        assert isinstance(e, ValueError)
    else:
        raise AssertionError("no exception")
