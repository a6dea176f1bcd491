"""Which uses of a name reach the builtin of that name (Python's own scoping).

A function's parameters and locals are resolved statically (LOAD_FAST /
LOAD_DEREF): `def kernel(input): ...` can never reach the builtin `input`.
Module and class scopes and a function's globals are looked up at run time
(globals, then builtins), so there the name is the builtin unless proven
otherwise; those uses, and bindings there, are reported.
"""

from __future__ import annotations

import ast
import dataclasses
import symtable
from collections.abc import Iterator


@dataclasses.dataclass(frozen=True)
class BuiltinUse:
  name: str
  scope: str      # "module", or the function's / class's name
  line: int


def _tables(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
  yield table
  for child in table.get_children():
    yield from _tables(child)


def _reaches_builtin(table: symtable.SymbolTable, symbol: symtable.Symbol
                     ) -> bool:
  if table.get_type() != "function":
    return True   # module and class scopes: dynamic lookup
  return symbol.is_global() or not (
      symbol.is_local() or symbol.is_parameter() or symbol.is_free())


def _first_line(tree: ast.AST, name: str, from_line: int) -> int:
  lines = [n.lineno for n in ast.walk(tree)
           if isinstance(n, ast.Name) and n.id == name
           and n.lineno >= from_line]
  return min(lines) if lines else from_line


def builtin_uses(source: str, tree: ast.AST, names: frozenset[str]
                 ) -> list[BuiltinUse]:
  """Uses (and module/class-level bindings) of `names` that are not a
  function's own argument, local or closure variable, in source order."""
  top = symtable.symtable(source, "<candidate>", "exec")
  found = []
  for table in _tables(top):
    for symbol in table.get_symbols():
      if symbol.get_name() in names and _reaches_builtin(table, symbol):
        scope = "module" if table.get_type() == "module" else table.get_name()
        found.append(BuiltinUse(symbol.get_name(), scope, _first_line(
            tree, symbol.get_name(), table.get_lineno())))
  return sorted(found, key=lambda u: (u.line, u.name))
