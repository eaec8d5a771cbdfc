"""tvm_tma.macro_lookup: TVMScript macros find their parser without frame infos."""

from __future__ import annotations

import inspect

import pytest
from tvm.script import tirx as T
from tvm.script.parser.core.parser import ScriptMacro

import tvm_tma  # noqa: F401  (installs the lookup)
from tvm_tma import macro_lookup


def test_the_lookup_is_installed_once_on_import():
    assert ScriptMacro.__dict__["_find_parser_def"] is macro_lookup._find_parser_def
    assert macro_lookup.install() is True
    assert ScriptMacro.__dict__["_find_parser_def"] is macro_lookup._find_parser_def


def test_it_finds_the_innermost_parser_and_fails_as_tvm_does_outside_one():
    name = ScriptMacro.parser_object_name
    macro = type("Macro", (), {"parser_object_name": name})()

    def called_under(parser):
        globals_with_parser = {name: parser, "find": macro_lookup._find_parser_def,
                               "macro": macro}
        return eval("find(macro)", globals_with_parser)  # a frame whose globals hold it

    sentinel = object()
    assert called_under(sentinel) is sentinel
    with pytest.raises(RuntimeError, match=f"{name} not available"):
        macro_lookup._find_parser_def(macro)
    # The frames it walks are the ones TVM's lookup walked: the caller chain.
    assert inspect.currentframe().f_globals.get(name) is None


def test_macros_in_macros_still_expand():
    @T.inline
    def inner(buf, value):
        buf[0] = value

    @T.inline
    def outer(buf):
        inner(buf, T.float32(2))
        inner(buf, buf[0] + T.float32(1))

    @T.prim_func
    def func(a: T.Buffer((1,), "float32")):
        outer(a)

    text = func.script()
    assert "T.float32(2.0)" in text and "+ T.float32(1.0)" in text
