"""The core of needle: the computational graph and reverse-mode automatic differentiation.

Every Tensor is a node of a graph. A leaf holds data given by the user; any other node
remembers the Op that made it and the Tensors it was made from (its inputs). Running
an expression forward builds this graph as a side effect; `backward()` walks it in
reverse topological order and asks each op for the gradient of its inputs.

Gradients are themselves Tensors built from needle ops, so they have graphs of their
own and can be differentiated again (higher-order gradients).
"""

from functools import reduce
from operator import add

import numpy

# When True, ops only build the graph; data is computed when someone asks for it.
LAZY_MODE = False
# The number of live Values: a cheap way to check that graphs do not leak.
TENSOR_COUNTER = 0

# needle's data lives in NumPy arrays (later homeworks swap in their own backend).
NDArray = numpy.ndarray


class CPUDevice:
    """Where a tensor's data lives. This needle runs on NumPy, so there is one device."""

    def __repr__(self):
        return "cpu()"

    def __eq__(self, other):
        return isinstance(other, CPUDevice)

    def __hash__(self):
        return hash("cpu")


def cpu():
    return CPUDevice()


class Op:
    """An operation: how to compute its output, and how to send gradients back."""

    def __call__(self, *args):
        raise NotImplementedError()

    def compute(self, *args):
        """Compute the output from the inputs' NumPy arrays."""
        raise NotImplementedError()

    def gradient(self, out_grad, node):
        """Given the adjoint of `node` (this op's output), return the partial adjoint of
        each input: one Tensor, or a tuple with one Tensor per input."""
        raise NotImplementedError()

    def gradient_as_tuple(self, out_grad, node):
        """The same as `gradient`, always as a tuple, so callers can zip it with inputs."""
        output = self.gradient(out_grad, node)
        if isinstance(output, tuple):
            return output
        if isinstance(output, list):
            return tuple(output)
        return (output,)


class TensorOp(Op):
    """An op whose output is a Tensor. Calling it adds a node to the graph."""

    def __call__(self, *args):
        return Tensor.make_from_op(self, args)


class Value:
    """A node of the computational graph."""

    op: Op | None  # the op that made this node; None for a leaf
    inputs: list  # the nodes the op was applied to
    cached_data: NDArray | None  # the node's data, once computed
    requires_grad: bool

    def realize_cached_data(self):
        """Compute the data if it is not there yet (lazy mode), and return it."""
        if self.cached_data is None:
            self.cached_data = self.op.compute(*[x.realize_cached_data() for x in self.inputs])
        return self.cached_data

    def is_leaf(self):
        return self.op is None

    def __del__(self):
        global TENSOR_COUNTER
        # A notebook kernel's shutdown may clear the globals before the last Values go:
        # then there is nothing left to count.
        try:
            TENSOR_COUNTER -= 1
        except (NameError, TypeError):
            pass

    def _init(self, op, inputs, *, cached_data=None, requires_grad=None):
        global TENSOR_COUNTER
        TENSOR_COUNTER += 1
        if requires_grad is None:
            # A node needs a gradient if any of the nodes it was made from does.
            requires_grad = any(x.requires_grad for x in inputs)
        self.op = op
        self.inputs = list(inputs)
        self.cached_data = cached_data
        self.requires_grad = requires_grad

    @classmethod
    def make_const(cls, data, *, requires_grad=False):
        """A leaf holding `data` (an array, or a Tensor whose data is shared)."""
        if isinstance(data, Value):
            data = data.realize_cached_data()
        value = cls.__new__(cls)
        value._init(None, [], cached_data=data, requires_grad=requires_grad)
        return value

    @classmethod
    def make_from_op(cls, op, inputs):
        """The node for `op` applied to `inputs`.

        In lazy mode nothing is computed yet. In eager mode the data is computed now,
        and a result that needs no gradient is returned as a leaf: no gradient will
        ever flow through it, so there is no point keeping its graph alive.
        """
        value = cls.__new__(cls)
        value._init(op, inputs)
        if not LAZY_MODE:
            if not value.requires_grad:
                return cls.make_const(value.realize_cached_data())
            value.realize_cached_data()
        return value


class Tensor(Value):
    grad: "Tensor"

    def __init__(self, array, *, device=None, dtype=None, requires_grad=True, **kwargs):
        # The data keeps its dtype unless one is asked for: float64 stays float64.
        # `device` is accepted for compatibility; NumPy data always lives on the CPU.
        if isinstance(array, Tensor):
            if dtype is None or numpy.dtype(dtype) == array.dtype:
                cached_data = array.realize_cached_data()
            else:
                cached_data = numpy.array(array.numpy(), dtype=dtype)
        else:
            cached_data = numpy.array(array, dtype=dtype)
        self._init(None, [], cached_data=cached_data, requires_grad=requires_grad)

    @property
    def data(self):
        """The tensor's data as a new leaf: reading it never tracks gradients."""
        return self.detach()

    @data.setter
    def data(self, value):
        """Replace the data without touching the graph: how optimizers update weights."""
        assert isinstance(value, Tensor)
        assert value.dtype == self.dtype, f"{value.dtype} {self.dtype}"
        self.cached_data = value.realize_cached_data()

    def detach(self):
        """A new leaf sharing this tensor's data. It has no op and no inputs, so the
        graph stops there: gradients never flow through a detached tensor."""
        return Tensor.make_const(self.realize_cached_data())

    @property
    def shape(self):
        return self.realize_cached_data().shape

    @property
    def dtype(self):
        return self.realize_cached_data().dtype

    @property
    def device(self):
        return cpu()

    def numpy(self):
        return self.realize_cached_data()

    def backward(self, out_grad=None):
        """Compute the gradient of this tensor with respect to every node of its graph.

        Without `out_grad` the seed is ones: the gradient of the sum of this tensor.
        """
        if out_grad is None:
            out_grad = init.ones(*self.shape, dtype=self.dtype, device=self.device)
        compute_gradient_of_variables(self, out_grad)

    def __repr__(self):
        return "needle.Tensor(" + str(self.realize_cached_data()) + ")"

    def __str__(self):
        return str(self.realize_cached_data())

    # Operators build ops: with another Tensor the element-wise op, with a Python
    # number the scalar op (the number is a constant, not a node of the graph).

    def __add__(self, other):
        if isinstance(other, Tensor):
            return ops.EWiseAdd()(self, other)
        return ops.AddScalar(other)(self)

    def __mul__(self, other):
        if isinstance(other, Tensor):
            return ops.EWiseMul()(self, other)
        return ops.MulScalar(other)(self)

    def __pow__(self, other):
        if isinstance(other, Tensor):
            return ops.EWisePow()(self, other)
        return ops.PowerScalar(other)(self)

    def __sub__(self, other):
        if isinstance(other, Tensor):
            return ops.EWiseAdd()(self, ops.Negate()(other))
        return ops.AddScalar(-other)(self)

    def __rsub__(self, other):
        return ops.AddScalar(other)(ops.Negate()(self))

    def __truediv__(self, other):
        if isinstance(other, Tensor):
            return ops.EWiseDiv()(self, other)
        return ops.DivScalar(other)(self)

    def __rtruediv__(self, other):
        return ops.MulScalar(other)(ops.PowerScalar(-1)(self))

    def __matmul__(self, other):
        return ops.MatMul()(self, other)

    def __rmatmul__(self, other):
        return ops.MatMul()(other, self)

    def matmul(self, other):
        return ops.MatMul()(self, other)

    def __neg__(self):
        return ops.Negate()(self)

    def sum(self, axes=None):
        return ops.Summation(axes)(self)

    def broadcast_to(self, shape):
        return ops.BroadcastTo(shape)(self)

    def reshape(self, shape):
        return ops.Reshape(shape)(self)

    def transpose(self, axes=None):
        return ops.Transpose(axes)(self)

    __radd__ = __add__
    __rmul__ = __mul__


def compute_gradient_of_variables(output_tensor, out_grad):
    """Reverse-mode differentiation: set `grad` on every node of the output's graph.

    A node used by several ops receives one partial adjoint from each of them; by the
    multivariate chain rule its gradient is their sum. Visiting nodes in reverse
    topological order guarantees that all of a node's consumers have been processed,
    so its list of partial adjoints is complete when we reach it.
    """
    ### BEGIN SOLUTION
    # hint: in reverse topological order, grad = sum of the partial adjoints received
    # The partial adjoints each node has received so far, from the ops that use it.
    node_to_output_grads_list = {output_tensor: [out_grad]}
    for node in reversed(find_topo_sort([output_tensor])):
        node.grad = sum_node_list(node_to_output_grads_list[node])
        if node.is_leaf():
            continue
        for inp, grad in zip(node.inputs, node.op.gradient_as_tuple(node.grad, node), strict=True):
            node_to_output_grads_list.setdefault(inp, []).append(grad)
    ### END SOLUTION


def find_topo_sort(node_list):
    """The nodes that the nodes of `node_list` depend on, in topological order.

    A post-order depth-first search appends a node only after all of its inputs (and
    theirs, recursively) have been appended, so every node comes after the nodes it
    was computed from: that is a topological order. The order is the contract's: the
    roots one after the other, each node's inputs in the order of `node.inputs`, a node
    already placed skipped. A chain of 10^5 ops must work, and Python's recursion limit
    (about 1000 frames) rules out a recursive search.
    """
    # An explicit stack instead of recursion: it holds the path from the root down, each
    # node with an iterator over the inputs it has still to visit, which is exactly what
    # recursion's frames would hold, so the order is the recursive search's.
    ### BEGIN SOLUTION
    # hint: post-order DFS with an explicit stack: inputs first (in order), then the node; skip visited nodes
    topo_order, visited = [], set()
    for root in node_list:
        if root in visited:
            continue
        visited.add(root)
        stack = [(root, iter(root.inputs))]
        while stack:
            node, inputs = stack[-1]
            for inp in inputs:
                if inp not in visited:  # go down into the first input not visited yet
                    visited.add(inp)
                    stack.append((inp, iter(inp.inputs)))
                    break
            else:  # every input is placed: the node comes after them
                stack.pop()
                topo_order.append(node)
    return topo_order
    ### END SOLUTION


def sum_node_list(node_list):
    """Sum Tensors with needle's add, without the `0 +` that Python's sum would add."""
    return reduce(add, node_list)


# ops and init use Tensor, and Tensor's operators use ops: importing them at the end,
# once Tensor exists, breaks the import cycle.
from . import init, ops  # noqa: E402
