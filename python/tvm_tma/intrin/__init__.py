"""TMA instructions as typed, verified builders over TVM's ``T.ptx`` dialect."""

from . import tensor_copy
from .errors import IntrinError
from .tensor_copy import load, load_mnemonic, store, store_mnemonic

__all__ = ["IntrinError", "load", "load_mnemonic", "store", "store_mnemonic", "tensor_copy"]
