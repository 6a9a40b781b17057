"""micrograd: a scalar-valued automatic differentiation engine.

`Value` (engine.py) holds one number and the rule to push gradients back through the
operation that made it; `nn.py` builds neurons, layers and an MLP out of Values.
"""

from micrograd.engine import Value

__all__ = ["Value"]
