"""micrograd's bug bank (see __init__.py): wrong rules, wrong backward(), wrong MLPs."""

from __future__ import annotations

from tests.harness.bugs import Bug

ENGINE = "micrograd/engine.py"
NN = "micrograd/nn.py"

RECURSIVE_TOPO = """\
        topo, visited = [], set()

        def build_topo(v):
            if v not in visited:
                visited.add(v)
                for child in v._prev:
                    build_topo(child)
                topo.append(v)

        build_topo(self)
"""

#: the recursive sort as a method of its own, which backward() calls (not nested in it)
TOPO_METHOD_CALL = """\
        topo, visited = [], set()
        self._build_topo(topo, visited)
"""
TOPO_METHOD = """
    def _build_topo(self, topo, visited):
        if self not in visited:
            visited.add(self)
            for child in self._prev:
                child._build_topo(topo, visited)
            topo.append(self)

    def backward(self):
"""

BREADTH_FIRST = """\
        self.grad = 1.0
        queue, seen = [self], {self}
        for node in queue:  # breadth first from the output: not a topological order
            node._backward()
            for child in node._prev:
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
"""

ITERATIVE_TOPO = """\
        topo, visited = [], set()
        visited.add(self)
        stack = [(self, iter(self._prev))]
        while stack:
            node, inputs = stack[-1]
            for child in inputs:
                if child not in visited:  # go down into the first input not visited yet
                    visited.add(child)
                    stack.append((child, iter(child._prev)))
                    break
            else:  # every input is placed: the node comes after them
                stack.pop()
                topo.append(node)
"""

RESET_INTERIOR = """\
        for node in topo:
            if node._prev:
                node.grad = 0.0
"""

BUGS = [
    Bug(
        "add-assigns",
        "add's rule assigns (`=`) instead of accumulating (`+=`)",
        [
            (
                ENGINE,
                "            self.grad += out.grad\n            other.grad += out.grad\n",
                "            self.grad = out.grad\n            other.grad = out.grad\n",
            )
        ],
        caught_by=[
            "test_ops::rule[add-same-leaf]",
            "test_accumulation::add_twice",
            "test_hidden_ops::hidden_backward[add-three-times]",
        ],
        says=("add",),
        slip=("+=",),
    ),
    Bug(
        "add-other-left-out",
        "add's rule passes out.grad on to self alone: other, its second input, gets nothing",
        [
            (
                ENGINE,
                "            self.grad += out.grad\n            other.grad += out.grad\n",
                "            self.grad += out.grad\n",
            )
        ],
        caught_by=[
            "test_ops::rule[add]",
            "test_ops::rule[add-same-leaf]",
            "test_ops::backward[add]",
            "test_ops::backward[sub]",  # a - b is a + (-b): add runs inside
        ],
        says=("wrong gradient from add",),
        slip=("adds nothing to the gradient of", "its own contribution"),
    ),
    Bug(
        "mul-assigns",
        "mul's rule assigns (`=`) instead of accumulating (`+=`)",
        [
            (
                ENGINE,
                "            self.grad += other.data * out.grad\n"
                "            other.grad += self.data * out.grad\n",
                "            self.grad = other.data * out.grad\n"
                "            other.grad = self.data * out.grad\n",
            )
        ],
        caught_by=[
            "test_ops::rule[mul-same-leaf]",
            "test_accumulation::mul_self",
            "test_hidden_ops::hidden_rule[mul-same-leaf]",
        ],
        says=("mul",),
        slip=("+=",),
    ),
    Bug(
        "mul-rule-not-set",
        "mul defines its rule but never sets it as the result's (`out._backward = _backward`)",
        [
            (
                ENGINE,
                "            other.grad += self.data * out.grad\n            ### END SOLUTION\n\n"
                "        out._backward = _backward\n",
                "            other.grad += self.data * out.grad\n            ### END SOLUTION\n\n",
            )
        ],
        caught_by=[
            "test_ops::rule[mul*]",
            "test_composite::neuron",
            "test_hidden_ops::hidden_rule[mul-*]",
            "test_ops::backward[neg]",
        ],
        says=("mul",),
        slip=("adds nothing", "out._backward = _backward"),
    ),
    Bug(
        "seeded-after-the-pass",
        "backward() sets self.grad = 1 after running the closures, not before",
        [
            (
                ENGINE,
                "        self.grad = 1.0\n        for node in reversed(topo):\n"
                "            node._backward()\n",
                "        for node in reversed(topo):\n            node._backward()\n"
                "        self.grad = 1.0\n",
            )
        ],
        # (where the output is made of several ops, `a - b`, the case cannot tell this from
        # closures run inputs first, and names neither)
        caught_by=[
            "test_ops::backward[add]",
            "test_ops::backward[mul]",
            "test_ops::backward[exp]",
            "test_composite::neuron",
        ],
        says=("backward",),
        slip=("passed nothing on from the output", "before running the closures"),
    ),
    Bug(
        "output-left-out-of-the-sort",
        "the sort lists every node but the output it starts from, whose closure then never runs",
        [
            (
                ENGINE,
                "                stack.pop()\n                topo.append(node)\n",
                "                stack.pop()\n"
                "                if node is not self:\n"
                "                    topo.append(node)\n",
            )
        ],
        caught_by=["test_ops::backward[add]", "test_ops::backward[mul]", "test_composite::neuron"],
        says=("backward",),
        slip=("passed nothing on from the output", "list the output itself"),
    ),
    Bug(
        "rmul-calls-itself",
        "`2 * x` runs x.__rmul__(2), which returns other * self: x.__rmul__(2) again, without end",
        [
            (
                ENGINE,
                "    def __rmul__(self, other):  # other * self\n        return self * other\n",
                "    def __rmul__(self, other):  # other * self\n        return other * self\n",
            )
        ],
        caught_by=["test_ops::backward[rmul]"],
        says=("RecursionError in Value.__rmul__",),
        slip=("calls itself again", "hands it back to __rmul__"),
    ),
    Bug(
        "exp-without-out-grad",
        "exp's rule forgets the chain rule: `self.grad += out.data`",
        [(ENGINE, "            self.grad += out.data * out.grad\n", "            self.grad += out.data\n")],
        caught_by=["test_ops::rule[exp*]", "test_hidden_ops::hidden_rule[exp-*]"],
        says=("exp",),
        slip=("chain rule",),
    ),
    Bug(
        "exp-passes-unchanged",
        "exp's rule passes out.grad on as it came, without exp's own derivative",
        [(ENGINE, "            self.grad += out.data * out.grad\n", "            self.grad += out.grad\n")],
        caught_by=["test_ops::rule[exp*]", "test_hidden_ops::hidden_rule[exp-five]"],  # right at exp-zero
        says=("exp",),
        slip=("passes out.grad on unchanged", "exp(x)"),
    ),
    Bug(
        "sigmoid-passes-unchanged",
        "sigmoid's rule passes out.grad on as it came, without sigmoid's own derivative",
        [
            (
                ENGINE,
                "            self.grad += out.data * (1.0 - out.data) * out.grad\n",
                "            self.grad += out.grad\n",
            )
        ],
        caught_by=["test_ops::rule[sigmoid]", "test_ops::backward[sigmoid]"],
        says=("sigmoid",),
        slip=("passes out.grad on unchanged", "sigmoid(x) * (1 - sigmoid(x))"),
    ),
    Bug(
        "pow-off-by-one",
        "pow's rule uses x**n instead of x**(n-1)",
        [(ENGINE, "other * self.data ** (other - 1) * out.grad", "other * self.data**other * out.grad")],
        caught_by=[
            "test_ops::rule[pow-*]",
            "test_hidden_ops::hidden_rule[pow-four]",
            "test_hidden_ops::hidden_rule[pow-minus-*]",
            "test_hidden_ops::hidden_rule[pow-sqrt]",
            "test_ops::backward[div]",  # a / b is a * b**-1: pow runs inside
        ],
        says=("pow",),
        slip=("the derivative of x**n is n * x**(n - 1)",),
    ),
    Bug(
        "pow-plus-one",
        "pow's rule uses x**(n+1) instead of x**(n-1)",
        [(ENGINE, "self.data ** (other - 1) * out.grad", "self.data ** (other + 1) * out.grad")],
        caught_by=[
            "test_ops::rule[pow-*]",
            "test_hidden_ops::hidden_rule[pow-four]",
            "test_ops::backward[div]",
        ],
        says=("pow",),
        slip=("the derivative of x**n is n * x**(n - 1)",),
    ),
    Bug(
        "pow-precedence",
        "pow's rule misses a pair of parentheses: `n * x**n - 1 * out.grad` for `n * x**(n - 1) * out.grad`",
        [(ENGINE, "other * self.data ** (other - 1) * out.grad", "other * self.data**other - 1 * out.grad")],
        caught_by=[
            "test_ops::rule[pow-*]",
            "test_hidden_ops::hidden_rule[pow-minus-one]",
            "test_ops::backward[div]",
        ],
        says=("wrong gradient from pow",),
        slip=("x**n - 1 where it means x**(n - 1)",),
    ),
    Bug(
        "log-multiplies",
        "log's rule multiplies out.grad by x where its derivative divides by it",
        [
            (
                ENGINE,
                "            self.grad += (1.0 / self.data) * out.grad\n",
                "            self.grad += self.data * out.grad\n",
            )
        ],
        caught_by=["test_ops::rule[log*]", "test_hidden_ops::hidden_rule[log-ten]"],  # (at 1, x is 1 / x)
        says=("log",),
        slip=("multiplies out.grad by x", "1 / x"),
    ),
    Bug(
        "sigmoid-wrong-sign",
        "sigmoid's rule subtracts its contribution (`-=`)",
        [
            (
                ENGINE,
                "            self.grad += out.data * (1.0 - out.data) * out.grad\n",
                "            self.grad -= out.data * (1.0 - out.data) * out.grad\n",
            )
        ],
        # (saturated, its slope is 0 either way)
        caught_by=["test_ops::rule[sigmoid]", "test_hidden_ops::hidden_rule[sigmoid-zero]"],
        says=("sigmoid",),
        slip=("wrong sign",),
    ),
    Bug(
        "tanh-no-square",
        "tanh's rule is 1 - tanh(x) instead of 1 - tanh(x)**2",
        [(ENGINE, "(1.0 - out.data**2) * out.grad", "(1.0 - out.data) * out.grad")],
        caught_by=[
            "test_ops::rule[tanh]",
            "test_composite::neuron",
            "test_hidden_ops::hidden_rule[tanh-negative]",
        ],
        says=("tanh",),
        slip=("the derivative is 1 - t**2",),
    ),
    Bug(
        "tanh-overflows",
        "tanh's rule as 1/cosh(x)**2: math.cosh overflows at x = 1000",
        [(ENGINE, "(1.0 - out.data**2) * out.grad", "(1.0 / math.cosh(self.data) ** 2) * out.grad")],
        caught_by=["test_ops::rule[tanh-large*]", "test_ops::backward[tanh-large*]"],
        says=("OverflowError", "Value.tanh._backward"),
        slip=("overflows at a large |x|", "1 - t**2, with t = out.data"),
    ),
    Bug(
        "relu-gradient-one-at-zero",
        "relu's slope at exactly 0 is 1 (`>= 0`); PyTorch's is 0",
        [
            (
                ENGINE,
                "(1.0 if self.data > 0 else 0.0) * out.grad",
                "(1.0 if self.data >= 0 else 0.0) * out.grad",
            )
        ],
        caught_by=[
            "test_ops::rule[relu-zero]",
            "test_ops::backward[relu-zero]",
            "test_hidden_ops::hidden_backward[relu-zero-computed]",
        ],
        says=("relu",),
        slip=("slope at 0",),
    ),
    Bug(
        "sigmoid-uses-input",
        "sigmoid's rule as s * (1 - x) with the input x instead of s * (1 - s)",
        [(ENGINE, "out.data * (1.0 - out.data) * out.grad", "out.data * (1.0 - self.data) * out.grad")],
        caught_by=[
            "test_ops::rule[sigmoid]",
            "test_ops::rule[sigmoid-large]",
            "test_hidden_ops::hidden_rule[sigmoid-positive]",
        ],
        says=("sigmoid",),
        slip=("uses its input",),
    ),
    Bug(
        "sigmoid-factor-left-out",
        "sigmoid's rule multiplies out.grad by s alone, without its factor 1 - s",
        [(ENGINE, "out.data * (1.0 - out.data) * out.grad", "out.data * out.grad")],
        caught_by=["test_ops::rule[sigmoid]", "test_ops::backward[sigmoid]"],
        says=("sigmoid",),
        slip=("by sigmoid(x), out.data alone", "sigmoid(x) * (1 - sigmoid(x))"),
    ),
    Bug(
        "log-divides-by-output",
        "log's rule divides by log(x) instead of by x",
        [(ENGINE, "(1.0 / self.data) * out.grad", "(1.0 / out.data) * out.grad")],
        caught_by=[
            "test_ops::rule[log*]",
            "test_hidden_ops::hidden_rule[log-ten]",
            "test_hidden_ops::hidden_rule[log-one]",  # log(1) = 0: the rule divides by zero
        ],
        says=("log",),
        slip=("uses its output",),
    ),
    Bug(
        "no-seed",
        "backward() never seeds the output's gradient with 1",
        [
            (
                ENGINE,
                "        self.grad = 1.0\n        for node in reversed(topo):",
                "        for node in reversed(topo):",
            )
        ],
        caught_by=[
            "test_ops::backward[add]",
            "test_ops::backward[mul]",
            "test_composite::sanity_check",
            "test_composite::output_gradient",
        ],
        says=("at the output", "seed"),
        slip=("seed",),
    ),
    Bug(
        "breadth-first-order",
        "backward() calls the rules breadth first from the output, not in reverse topological order",
        [(ENGINE, ITERATIVE_TOPO, "")]
        + [
            (
                ENGINE,
                RESET_INTERIOR + "        self.grad = 1.0\n"
                "        for node in reversed(topo):\n"
                "            node._backward()\n",
                BREADTH_FIRST,
            )
        ],
        caught_by=[
            "test_accumulation::reverse_topological_order",
            "test_composite::more_ops",
            "test_hidden_graph::hidden_ladder",
        ],
        says=("from backward()", "right on their own", "breadth first"),
        slip=("runs the closures breadth first", "run their _backward in reverse"),
    ),
    Bug(
        "double-counting",
        "backward() does not reset interior gradients (the original micrograd): a second "
        "backward() pushes the first one's gradients through again",
        [(ENGINE, RESET_INTERIOR, "")],
        caught_by=[
            "test_accumulation::backward_twice",
            "test_hidden_graph::hidden_backward_three_times",
            "test_hidden_graph::hidden_backward_from_two_outputs",
        ],
        says=("from backward()", "right on their own", "start the interior nodes' gradients from zero"),
        slip=("from zero",),
    ),
    Bug(
        "topo-without-visited",
        "backward()'s sort never checks `visited`: a node is listed once per path to it, and its "
        "closure runs as many times",
        [
            (
                ENGINE,
                "                if child not in visited:  # go down into the first input not visited yet\n",
                "                if True:  # go down into every input, visited or not\n",
            )
        ],
        caught_by=[
            "test_accumulation::reverse_topological_order",
            "test_hidden_graph::hidden_triple_use",
            "test_composite::more_ops",
            "test_mlp::mlp_backward",
        ],
        says=("more than once",),
        slip=("more than once", "visited"),
    ),
    Bug(
        "recursive-topo",
        "backward() sorts the graph recursively: RecursionError on deep graphs",
        [(ENGINE, ITERATIVE_TOPO, RECURSIVE_TOPO)],
        caught_by=[
            "test_deep::chain_5000",
            "test_deep::chain_of_a_hundred_thousand",
            "test_hidden_graph::hidden_deep_mixed_chain",
        ],
        says=("RecursionError", "Value.backward", "iterative"),
        slip=("iterative",),
    ),
    Bug(
        "recursive-topo-method",
        "backward() sorts the graph with a recursive method of Value's own: RecursionError on deep graphs",
        [(ENGINE, ITERATIVE_TOPO, TOPO_METHOD_CALL), (ENGINE, "\n    def backward(self):\n", TOPO_METHOD)],
        caught_by=["test_deep::chain_5000", "test_hidden_graph::hidden_deep_mixed_chain"],
        says=("RecursionError in Value._build_topo", "while running Value.backward"),
        slip=("iterative",),
    ),
    Bug(
        "detach-returns-self",
        "detach() returns the node itself, so gradients flow on",
        [(ENGINE, "        return Value(self.data)\n", "        return self\n")],
        caught_by=["test_detach::*", "test_hidden_graph::hidden_detach_*"],
        says=("detach",),
        slip=("new leaf",),
    ),
    Bug(
        "zero-grad-does-nothing",
        "Module.zero_grad() leaves the gradients as they are",
        [(NN, "            p.grad = 0.0\n", "            pass\n")],
        caught_by=["test_accumulation::zero_grad", "test_hidden_graph::hidden_zero_grad_between_steps"],
        says=("after zero_grad",),
        slip=("zero_grad() left the parameters' gradients",),
    ),
    Bug(
        "rsub-reversed",
        "`other - self` built as `self - other`",
        [(ENGINE, "        return other + (-self)\n", "        return self + (-other)\n")],
        caught_by=[
            "test_ops::forward[rsub]",
            "test_ops::backward[rsub]",
            "test_hidden_ops::hidden_backward[rsub-*]",
        ],
        says=("rsub",),
        slip=("must return other - self",),
    ),
    Bug(
        "neg-outside-the-graph",
        "-x built as a fresh Value(-x.data): right value, but no gradient flows through it",
        [(ENGINE, "        return self * -1\n", "        return Value(-self.data)\n")],
        caught_by=[
            "test_ops::backward[neg]",
            "test_hidden_ops::hidden_backward[neg*]",
            "test_ops::backward[sub]",  # a - b is a + (-b): through __neg__
            "test_ops::backward[rsub]",
        ],
        says=("neg",),
        slip=("outside the graph: no gradient flows back",),
    ),
    Bug(
        "tanh-assigns",
        "tanh's rule assigns (`=`) instead of accumulating: right on a fresh leaf, wrong on one "
        "that already holds a gradient",
        [
            (
                ENGINE,
                "            self.grad += (1.0 - out.data**2) * out.grad\n",
                "            self.grad = (1.0 - out.data**2) * out.grad\n",
            )
        ],
        caught_by=["test_ops::rule[tanh]"],
        says=("tanh",),
        slip=("where it must add it (`+=`)",),
    ),
    Bug(
        "exp-uses-input",
        "exp's rule multiplies by the input x instead of the output exp(x)",
        [
            (
                ENGINE,
                "            self.grad += out.data * out.grad\n",
                "            self.grad += self.data * out.grad\n",
            )
        ],
        caught_by=["test_ops::rule[exp*]", "test_hidden_ops::hidden_rule[exp-*]"],
        says=("exp",),
        slip=("uses its input",),
    ),
    Bug(
        "tanh-uses-input",
        "tanh's rule as 1 - x**2 with the input x instead of the output tanh(x)",
        [(ENGINE, "(1.0 - out.data**2) * out.grad", "(1.0 - self.data**2) * out.grad")],
        caught_by=["test_ops::rule[tanh]", "test_hidden_ops::hidden_rule[tanh-negative]"],
        says=("tanh",),
        slip=("uses its input",),
    ),
    Bug(
        "leaves-reset-too",
        "backward() starts every gradient from zero, the leaves' too: a second backward() "
        "replaces the leaves' gradients instead of adding to them",
        [(ENGINE, RESET_INTERIOR, "        for node in topo:\n            node.grad = 0.0\n")],
        caught_by=["test_accumulation::backward_twice", "test_accumulation::backward_twice_core"],
        says=("from backward()",),
        slip=("resets the leaves",),
    ),
    Bug(
        "closures-in-topological-order",
        "backward() runs the closures in topological order, inputs first, not in reverse",
        [
            (
                ENGINE,
                "        for node in reversed(topo):\n            node._backward()\n",
                "        for node in topo:\n            node._backward()\n",
            )
        ],
        caught_by=["test_accumulation::reverse_topological_order", "test_composite::more_ops"],
        says=("from backward()",),
        slip=("in topological order (inputs first)",),
    ),
    Bug(
        "output-closure-only",
        "backward() runs the output's own closure and no other",
        [
            (
                ENGINE,
                "        for node in reversed(topo):\n            node._backward()\n",
                "        self._backward()\n",
            )
        ],
        # the same zeros as a walk in topological order: only backward's probe tells them apart
        caught_by=["test_accumulation::reverse_topological_order", "test_composite::more_ops"],
        says=("from backward()",),
        slip=("runs the output's own closure alone",),
    ),
    Bug(
        "hidden-layers-linear",
        "the MLP's hidden layers apply no ReLU (the contract's hidden layers do)",
        [(NN, "nonlin=i != len(nouts) - 1", "nonlin=False")],
        caught_by=["test_mlp::mlp_forward", "test_mlp::mlp_backward"],
        says=("the MLP contract",),
        slip=("hidden layers apply no ReLU",),
    ),
    Bug(
        "hidden-layers-tanh",
        "the MLP's neurons apply tanh where the contract's apply ReLU",
        [(NN, "return act.relu() if self.nonlin else act", "return act.tanh() if self.nonlin else act")],
        caught_by=["test_mlp::mlp_forward", "test_mlp::mlp_backward"],
        says=("the MLP contract",),
        slip=("hidden layers apply tanh",),
    ),
    Bug(
        "last-layer-relu",
        "the MLP's last layer applies ReLU too (the contract's last layer is linear)",
        [(NN, "nonlin=i != len(nouts) - 1", "nonlin=True")],
        caught_by=["test_mlp::mlp_input_gradient"],
        says=("the MLP contract",),
        slip=("last layer applies ReLU",),
    ),
    Bug(
        "relu-no-mask",
        "relu's rule passes out.grad back whatever the input's sign",
        [
            (
                ENGINE,
                "            self.grad += (1.0 if self.data > 0 else 0.0) * out.grad\n",
                "            self.grad += out.grad\n",
            )
        ],
        caught_by=[
            "test_ops::rule[relu-negative]",
            "test_ops::backward[relu-negative]",
            "test_mlp::mlp_backward",  # the MLP's neurons run relu
        ],
        says=("wrong gradient from relu",),
        slip=("below 0", "relu is flat there"),
    ),
    Bug(
        "relu-output-as-slope",
        "relu's rule multiplies out.grad by relu's output, as if its slope were its value",
        [
            (
                ENGINE,
                "            self.grad += (1.0 if self.data > 0 else 0.0) * out.grad\n",
                "            self.grad += out.data * out.grad\n",
            )
        ],
        caught_by=[
            "test_ops::rule[relu-positive]",
            "test_ops::backward[relu-positive]",
            "test_mlp::mlp_backward",  # the MLP's neurons run relu
        ],
        says=("wrong gradient from relu",),
        slip=("relu's output (out.data)", "slope is 1"),
    ),
    Bug(
        "mul-own-input",
        "mul's rule gives self its own value: `self.grad += self.data * out.grad`",
        [
            (
                ENGINE,
                "            self.grad += other.data * out.grad\n",
                "            self.grad += self.data * out.grad\n",
            )
        ],
        caught_by=[
            "test_ops::rule[mul]",
            "test_ops::rule[mul-number]",
            "test_ops::backward[mul]",
            "test_accumulation::mul_self",
            "test_ops::backward[neg]",  # -a is a * -1: mul runs inside
        ],
        says=("wrong gradient from mul",),
        slip=("its own value", "the other input's value"),
    ),
    Bug(
        "mul-reads-grad",
        "mul's rule multiplies by the inputs' gradients where it needs their values: "
        "`self.grad += other.grad * out.grad`",
        [
            (
                ENGINE,
                "            self.grad += other.data * out.grad\n"
                "            other.grad += self.data * out.grad\n",
                "            self.grad += other.grad * out.grad\n"
                "            other.grad += self.grad * out.grad\n",
            )
        ],
        caught_by=[
            "test_ops::rule[mul]",
            "test_ops::rule[mul-number]",
            "test_ops::backward[mul]",
            "test_composite::sanity_check",
            "test_ops::backward[neg]",
        ],
        says=("wrong gradient from mul",),
        slip=("gradient (.grad)", "needs its value (.data)"),
    ),
    Bug(
        "value-eq-unhashable",
        "Value defines __eq__ (by data), so Python takes its __hash__ away: no set can hold a node",
        [
            (
                ENGINE,
                "    def __add__(self, other):\n",
                "    def __eq__(self, other):\n"
                "        return isinstance(other, Value) and self.data == other.data\n\n"
                "    def __add__(self, other):\n",
            )
        ],
        caught_by=["test_accumulation::add_twice", "test_composite::*", "test_deep::chain_5000"],
        says=("TypeError", "unhashable"),
        slip=("must be hashable", "__hash__ = object.__hash__"),
    ),
    Bug(
        "bias-not-a-parameter",
        "Neuron.parameters() lists the weights and leaves out the bias",
        [(NN, "        return self.w + [self.b]\n", "        return self.w\n")],
        caught_by=["test_mlp::mlp_forward", "test_mlp::mlp_backward", "test_accumulation::zero_grad"],
        says=("parameters() lists", "each neuron's bias is left out"),
    ),
    Bug(
        "mlp-parameters-skip-last-layer",
        "MLP.parameters() lists every layer's but the last",
        [
            (
                NN,
                "        return [p for layer in self.layers for p in layer.parameters()]\n",
                "        return [p for layer in self.layers[:-1] for p in layer.parameters()]\n",
            )
        ],
        # MLP(2, [3, 1]): the last layer's 4 Values are as many as its 4 neurons' biases
        caught_by=["test_mlp::mlp_forward", "test_mlp::mlp_backward", "test_accumulation::zero_grad"],
        says=("parameters() lists", "the last layer's weights and biases are left out"),
    ),
    Bug(
        "layer-parameters-first-neuron",
        "Layer.parameters() lists its first neuron's only",
        [
            (
                NN,
                "        return [p for n in self.neurons for p in n.parameters()]\n",
                "        return self.neurons[0].parameters()\n",
            )
        ],
        caught_by=["test_mlp::mlp_forward", "test_mlp::mlp_backward", "test_accumulation::zero_grad"],
        says=("parameters() lists", "each layer lists its first neuron's weights and bias only"),
    ),
]

BY_NAME = {bug.name: bug for bug in BUGS}
