"""The scalar autograd engine.

Every arithmetic operation on a `Value` creates a new `Value` that remembers its inputs
(`_prev`) and a small closure (`_backward`) that knows the local derivative of that one
operation. `backward()` visits the graph from the output to the inputs and calls those
closures: that is the chain rule, applied one node at a time.
"""

import math


class Value:
    """A scalar, the operation that produced it, and the gradient of the output with respect to it."""

    def __init__(self, data, _children=(), _op="", label=""):
        self.data = float(data)
        self.grad = 0.0
        # A leaf has nothing to pass its gradient on to; an op replaces this closure.
        self._backward = lambda: None
        self._prev = set(_children)
        self._op = _op  # the operation that produced this node, for pictures and messages
        self.label = label

    # ---- the primitive operations: forward value, then its gradient rule right below ----
    #
    # Each `_backward` is a closure: it captures `self`, `other` and `out`, so when it runs
    # later, during backward(), it still knows which nodes it connects. Every rule adds with
    # `+=` rather than assigning, because a node used twice (say `a * a`, or `a` feeding two
    # different ops) receives one contribution per use, and the chain rule sums them.

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():
            # YOUR CODE HERE
            raise NotImplementedError('addition passes out.grad on to both inputs unchanged')

        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():
            # YOUR CODE HERE
            raise NotImplementedError('d(a*b)/da is b and d(a*b)/db is a; scale each by out.grad')

        out._backward = _backward
        return out

    def __pow__(self, other):
        assert isinstance(other, (int, float)), "only int and float powers are supported"
        out = Value(self.data**other, (self,), f"**{other}")

        def _backward():
            # YOUR CODE HERE
            raise NotImplementedError('the power rule, d(x**n)/dx = n * x**(n-1), also for negative and fractional n')

        out._backward = _backward
        return out

    def relu(self):
        out = Value(self.data if self.data > 0 else 0.0, (self,), "ReLU")

        def _backward():
            # YOUR CODE HERE
            raise NotImplementedError('the slope is 1 where the input is positive and 0 elsewhere, at exactly 0 too')

        out._backward = _backward
        return out

    def exp(self):
        out = Value(math.exp(self.data), (self,), "exp")

        def _backward():
            # YOUR CODE HERE
            raise NotImplementedError('exp is its own derivative, and out.data already holds exp(x)')

        out._backward = _backward
        return out

    def log(self):
        out = Value(math.log(self.data), (self,), "log")

        def _backward():
            # YOUR CODE HERE
            raise NotImplementedError('d(log x)/dx = 1/x')

        out._backward = _backward
        return out

    def tanh(self):
        # math.tanh saturates to +-1 for large |x|; the textbook formula
        # (e^2x - 1) / (e^2x + 1) overflows at x = 1000.
        out = Value(math.tanh(self.data), (self,), "tanh")

        def _backward():
            # YOUR CODE HERE
            raise NotImplementedError('d(tanh x)/dx = 1 - tanh(x)**2, written with out.data so that it cannot overflow')

        out._backward = _backward
        return out

    def sigmoid(self):
        # Two forms of the same function, each safe from overflow on its side of 0.
        if self.data >= 0:
            s = 1.0 / (1.0 + math.exp(-self.data))
        else:
            z = math.exp(self.data)
            s = z / (1.0 + z)
        out = Value(s, (self,), "sigmoid")

        def _backward():
            # YOUR CODE HERE
            raise NotImplementedError('d(sigmoid x)/dx = sigmoid(x) * (1 - sigmoid(x))')

        out._backward = _backward
        return out

    def detach(self):
        """A new leaf with the same number: gradients stop here and never reach `self`."""
        return Value(self.data)

    # ---- backward: the chain rule over the whole graph ----

    def backward(self):
        """Fill in `grad` of every node that `self` depends on, as PyTorch would.

        The contract, which goes beyond Karpathy's micrograd:

        - `self.grad` is seeded with 1: d self / d self.
        - Every interior node (one made by an op) starts this pass from zero, so its `grad`
          is its gradient in this pass alone. Leaves keep what they had and add to it:
          calling backward() twice adds the same gradients to the leaves twice, as
          PyTorch does, and `Module.zero_grad()` is how a training loop resets them.
          Without the reset, a second call would push the first call's interior gradients
          through the graph again and count them twice.
        - A chain of 10^5 operations works: Python's recursion limit (about 1000 frames)
          rules out a recursive graph walk.
        """
        # Task 1: the order. A node's gradient is complete only once every node that uses
        # it has passed its contribution back, so the closures must run in reverse
        # topological order: outputs before the inputs they were computed from.
        # A depth-first search that places each node after all of its inputs (post-order)
        # gives a topological order. Write it with an explicit stack, not recursion: the
        # stack holds the path from the output down, each node with an iterator over the
        # inputs it has still to visit, which is exactly what recursion's frames would hold.
        # YOUR CODE HERE
        raise NotImplementedError('a list `topo`, each node after its inputs: an iterative post-order DFS (10**5 ops deep)')

        # Task 2: the pass. Reset the interior nodes' gradients (the leaves' accumulate),
        # seed the output with 1, then run every node's `_backward` in reverse topological
        # order.
        # YOUR CODE HERE
        raise NotImplementedError("zero the interior nodes' grad, set self.grad = 1, then call _backward over reversed(topo)")

    # ---- everything else is built from the primitives above ----
    #
    # `2 * x` first asks int.__mul__, which does not know Value and returns NotImplemented;
    # Python then tries the reflected x.__rmul__(2). That is why the r-operators exist.
    # Being compositions, these need no gradient rules of their own.

    def __neg__(self):  # -self
        return self * -1

    def __radd__(self, other):  # other + self
        return self + other

    def __sub__(self, other):  # self - other
        return self + (-other)

    def __rsub__(self, other):  # other - self
        return other + (-self)

    def __rmul__(self, other):  # other * self
        return self * other

    def __truediv__(self, other):  # self / other
        return self * other**-1

    def __rtruediv__(self, other):  # other / self
        return other * self**-1

    def __repr__(self):
        return f"Value(data={self.data}, grad={self.grad})"
