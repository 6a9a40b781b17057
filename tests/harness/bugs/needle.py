"""needle's bug bank (see __init__.py): wrong gradient rules, topological order, backward,
lazy mode and detach."""

from __future__ import annotations

from tests.harness.bugs import Bug

AUTOGRAD = "needle/autograd.py"

ITERATIVE_TOPO = """\
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
"""

RECURSIVE_TOPO = """\
    visited = set()
    topo_order = []

    def visit(node):
        if node in visited:
            return
        visited.add(node)
        for inp in node.inputs:
            visit(inp)
        topo_order.append(node)

    for root in node_list:
        visit(root)
    return topo_order
"""
#: the recursive search as a function of its own, as some homework has it (`topo_sort_dfs`)
DFS_CALL = """\
    topo_order, visited = [], set()
    for root in node_list:
        topo_sort_dfs(root, visited, topo_order)
    return topo_order
"""
DFS = """def topo_sort_dfs(node, visited, topo_order):
    if node in visited:
        return
    visited.add(node)
    for inp in node.inputs:
        topo_sort_dfs(inp, visited, topo_order)
    topo_order.append(node)


def find_topo_sort(node_list):
"""
OPS = "needle/ops.py"

BUGS = [
    Bug(
        "broadcast-axes-from-the-left",
        "BroadcastTo's gradient lines the shapes up from the left: it sums the wrong axes",
        [
            (
                OPS,
                "    stretched = [lead + i for i, n in enumerate(shape)"
                " if n == 1 and x.shape[lead + i] != 1]\n"
                "    axes = tuple(range(lead)) + tuple(stretched)",
                "    stretched = [i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1]\n"
                "    axes = tuple(stretched) + tuple(range(len(shape), len(x.shape)))",
            )
        ],
        caught_by=[
            "test_op_gradients::op_gradient[BroadcastTo-prepend]",
            "test_broadcast::broadcast_gradient[prepend]",
            "test_broadcast::broadcast_gradient[prepend-and-stretch]",
        ],
        says=("BroadcastTo.gradient",),
        slip=("lines the shapes up from the left", "sum the leading axes"),
    ),
    Bug(
        "addscalar-adds-scalar",
        "AddScalar's gradient adds the scalar to out_grad",
        [
            (
                OPS,
                "        return out_grad\n        ### END SOLUTION\n\n\ndef add_scalar",
                "        return out_grad + self.scalar\n        ### END SOLUTION\n\n\ndef add_scalar",
            )
        ],
        caught_by=["test_op_gradients::op_gradient[AddScalar]", "test_ops::op_backward[add_scalar]"],
        says=("AddScalar",),
        slip=("adds the scalar to out_grad", "whatever c is"),
    ),
    Bug(
        "negate-sign-lost",
        "Negate's gradient passes out_grad on unchanged: `a - b` and `2 - a`, built on it, go wrong too",
        [(OPS, "        return negate(out_grad)\n", "        return out_grad\n")],
        caught_by=[
            "test_op_gradients::op_gradient[Negate]",
            "test_ops::op_backward[neg]",
            "test_ops::op_backward[sub]",
            "test_ops::op_backward[rsub]",
        ],
        says=("Negate",),
        slip=("out_grad unchanged", "derivative, -1"),
    ),
    Bug(
        "mulscalar-passes-unchanged",
        "MulScalar's gradient returns out_grad as it came, without the scalar",
        [(OPS, "        return out_grad * self.scalar\n", "        return out_grad\n")],
        caught_by=["test_op_gradients::op_gradient[MulScalar]", "test_ops::op_backward[mul_scalar]"],
        says=("MulScalar",),
        slip=("out_grad unchanged", "the scalar c"),
    ),
    Bug(
        "relu-passes-unchanged",
        "ReLU's gradient returns out_grad as it came, with no mask",
        [(OPS, "        return out_grad * mask\n", "        return out_grad\n")],
        caught_by=["test_op_gradients::op_gradient[ReLU]", "test_ops::op_backward[relu]"],
        says=("ReLU",),
        slip=("out_grad unchanged", "1 where a > 0"),
    ),
    Bug(
        "sum-to-shape-not-reshaped",
        "BroadcastTo's gradient sums the stretched axes away and leaves the sum in that shape",
        [
            (
                OPS,
                "    return reshape(summation(x, axes), shape) if axes else x\n",
                "    return summation(x, axes) if axes else x\n",
            )
        ],
        caught_by=[
            "test_broadcast::broadcast_gradient[stretch-last]",
            "test_broadcast::broadcast_gradient[stretch-first]",
        ],
        says=("BroadcastTo",),
        slip=("right numbers", "reshape it to its input's shape"),
    ),
    Bug(
        "divscalar-multiplies",
        "DivScalar's gradient multiplies out_grad by the scalar where it must divide",
        [(OPS, "        return out_grad / self.scalar\n", "        return out_grad * self.scalar\n")],
        caught_by=["test_op_gradients::op_gradient[DivScalar]", "test_ops::op_backward[div_scalar]"],
        says=("DivScalar",),
        slip=("multiplies out_grad by the scalar", "1 / c"),
    ),
    Bug(
        "exp-without-out-grad",
        "Exp's gradient returns its local derivative (node) without multiplying by out_grad",
        [(OPS, "        return out_grad * node\n", "        return node\n")],
        caught_by=["test_op_gradients::op_gradient[Exp]", "test_ops::op_backward[exp]"],
        says=("Exp",),
        slip=("local derivative alone", "multiply it by out_grad"),
    ),
    Bug(
        "reshape-gradient-unchanged",
        "Reshape's gradient returns out_grad as it came, in the output's shape",
        [(OPS, "        return reshape(out_grad, node.inputs[0].shape)\n", "        return out_grad\n")],
        caught_by=["test_op_gradients::op_gradient[Reshape]", "test_reshape_transpose::reshape[merge]"],
        says=("Reshape",),
        slip=("reshape out_grad back",),
    ),
    Bug(
        "log-multiplies",
        "Log's gradient multiplies out_grad by its input where the derivative divides by it",
        [(OPS, "        return out_grad / node.inputs[0]\n", "        return out_grad * node.inputs[0]\n")],
        caught_by=["test_op_gradients::op_gradient[Log]", "test_ops::op_backward[log]"],
        says=("Log",),
        slip=("multiplies out_grad by its input", "1 / a"),
    ),
    Bug(
        "topo-without-visited",
        "find_topo_sort never checks `visited`: a node is listed once per path to it, and backward "
        "adds its consumers' adjoints as many times",
        [
            (
                AUTOGRAD,
                "                if inp not in visited:  # go down into the first input not visited yet\n",
                "                if True:  # go down into every input, visited or not\n",
            )
        ],
        caught_by=[
            "test_topo::topo_diamond",
            "test_broadcast::broadcast_twice",
            "test_composite::diamond",
            "test_higher_order::gradient_norm",
            "test_summation::mean_and_variance",
            # a step's update (made from its gradient) is in no graph the sort is asked about
            "test_composite::sgd_steps",
            "test_hidden_shapes::hidden_softmax",
        ],
        says=("more than once",),
        slip=("more than once",),
    ),
    Bug(
        "power-scalar-off-by-one",
        "PowerScalar's gradient takes a to the power n where the derivative has n - 1",
        [
            (
                OPS,
                "        return out_grad * power_scalar(a, self.scalar - 1) * self.scalar\n",
                "        return out_grad * power_scalar(a, self.scalar) * self.scalar\n",
            )
        ],
        caught_by=["test_op_gradients::op_gradient[PowerScalar]", "test_ops::op_backward[pow_scalar]"],
        says=("PowerScalar",),
        slip=("wrong power", "n * a**(n - 1)"),
    ),
    Bug(
        "power-scalar-factor-left-out",
        "PowerScalar's gradient leaves out the factor n",
        [
            (
                OPS,
                "        return out_grad * power_scalar(a, self.scalar - 1) * self.scalar\n",
                "        return out_grad * power_scalar(a, self.scalar - 1)\n",
            )
        ],
        # rdiv: 3.0 / a is a**-1 * 3.0, where n = -1 (see test_slips' SAME_NUMBERS)
        caught_by=[
            "test_op_gradients::op_gradient[PowerScalar]",
            "test_ops::op_backward[pow_scalar]",
            "test_ops::op_backward[rdiv]",
        ],
        says=("PowerScalar",),
        slip=("leaves out the factor n", "n * a**(n - 1)"),
    ),
    Bug(
        "summation-not-broadcast-back",
        "Summation's gradient keeps the summed axes as size 1 but never broadcasts them back",
        [
            (
                OPS,
                "        return broadcast_to(reshape(out_grad, kept_shape), in_shape)",
                "        return reshape(out_grad, kept_shape)",
            )
        ],
        caught_by=[
            "test_op_gradients::op_gradient[Summation-all]",
            "test_op_gradients::op_gradient[Summation-tuple]",
            "test_summation::summation_axes[none]",
            "test_summation::summation_axes[tuple-two]",
        ],
        says=("Summation", "a gradient must have its input's shape"),
        slip=("broadcast it back",),
    ),
    Bug(
        "summation-broadcast-as-it-comes",
        "Summation's gradient broadcasts out_grad to the input's shape without making the summed "
        "axes size 1 first",
        [
            (
                OPS,
                "        return broadcast_to(reshape(out_grad, kept_shape), in_shape)",
                "        return broadcast_to(out_grad, in_shape)",
            )
        ],
        caught_by=["test_ops::op_backward[sum]", "test_op_gradients::op_gradient[Summation-int]"],
        says=("Summation.gradient",),
        slip=("as it comes", "size 1 again first"),
    ),
    Bug(
        "summation-first-axis-only",
        "Summation's gradient restores only the first of several summed axes",
        [
            (
                OPS,
                "        for axis in range(len(in_shape)) if self.axes is None else self.axes:\n"
                "            kept_shape[axis] = 1",
                "        for axis in range(len(in_shape)) if self.axes is None else self.axes[:1]:\n"
                "            kept_shape[axis] = 1",
            )
        ],
        caught_by=[
            "test_op_gradients::op_gradient[Summation-tuple]",
            "test_summation::summation_axes[tuple-two]",
        ],
        says=("Summation.gradient",),
        slip=("restores only some of the summed axes", "every summed axis size 1"),
    ),
    Bug(
        "matmul-batched-not-summed",
        "MatMul's gradient is not summed back over broadcast batch axes",
        [
            (
                OPS,
                "        return _sum_to_shape(grad_a, a.shape), _sum_to_shape(grad_b, b.shape)",
                "        return grad_a, grad_b",
            )
        ],
        caught_by=[
            "test_op_gradients::op_gradient[MatMul-broadcast]",
            "test_matmul::matmul[broadcast-rhs]",
            "test_matmul::matmul[broadcast-lhs]",
        ],
        says=("MatMul", "a gradient must have its input's shape"),
        slip=("sum it over",),
    ),
    Bug(
        "adjoints-overwritten",
        "backward keeps only the last partial adjoint a node receives instead of their sum",
        [
            (
                AUTOGRAD,
                "            node_to_output_grads_list.setdefault(inp, []).append(grad)",
                "            node_to_output_grads_list[inp] = [grad]",
            )
        ],
        # the last: a gradient read inside the case, whose backward's nodes are not on the tape
        caught_by=[
            "test_composite::partial_adjoints_summed",
            "test_composite::diamond",
            "test_higher_order::gradient_norm",
        ],
        says=("partial adjoints",),
        slip=("only one of the partial adjoints", "add them up"),
    ),
    Bug(
        "first-adjoint-kept",
        "backward keeps the first partial adjoint a node receives and drops the others",
        [
            (
                AUTOGRAD,
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n",
                "        node.grad = node_to_output_grads_list[node][0]\n",
            )
        ],
        # the last: a gradient read inside the case, whose backward's nodes are not on the tape
        caught_by=[
            "test_composite::partial_adjoints_summed",
            "test_composite::diamond",
            "test_higher_order::gradient_norm",
        ],
        says=("partial adjoints",),
        slip=("only one of the partial adjoints", "add them up"),
    ),
    Bug(
        "leaf-rule-asked",
        "backward asks every node for its op's gradient, leaves too, whose op is None",
        [(AUTOGRAD, "        if node.is_leaf():\n            continue\n", "")],
        caught_by=["test_composite::diamond", "test_broadcast::*"],
        says=("AttributeError", "compute_gradient_of_variables"),
        slip=("a leaf has no op", "only receives its gradient"),
    ),
    Bug(
        "gradient-not-as-tuple",
        "backward zips a node's inputs with `gradient`, which returns one Tensor for a one-input op",
        [(AUTOGRAD, "node.op.gradient_as_tuple(node.grad, node)", "node.op.gradient(node.grad, node)")],
        caught_by=["test_composite::diamond", "test_broadcast::*"],
        says=("TypeError", "compute_gradient_of_variables"),
        slip=("iterates over a single Tensor", "gradient_as_tuple"),
    ),
    Bug(
        "adjoint-not-in-a-list",
        "backward stores a node's partial adjoint alone, not in a list, for sum_node_list to add",
        [
            (
                AUTOGRAD,
                "            node_to_output_grads_list.setdefault(inp, []).append(grad)\n",
                "            node_to_output_grads_list[inp] = grad\n",
            )
        ],
        caught_by=["test_composite::diamond", "test_broadcast::*"],
        says=("TypeError", "sum_node_list"),
        slip=("hands sum_node_list a single Tensor", "in a list"),
    ),
    Bug(
        "backward-passes-its-out-grad",
        "backward calls every rule with its own out_grad (the output's) where a node's gradient is due",
        [
            (
                AUTOGRAD,
                "node.op.gradient_as_tuple(node.grad, node)",
                "node.op.gradient_as_tuple(out_grad, node)",
            )
        ],
        caught_by=[
            "test_broadcast::broadcast_gradient[stretch-last]",
            "test_broadcast::bias_add",
            "test_composite::two_layer_network",
            # where no rule raises, the numbers alone: backward's probe tells what it hands the rules
            "test_broadcast::broadcast_gradient[prepend]",
            "test_random::random_program[4]",
        ],
        says=("backward called",),
        slip=("out_grad is its own gradient", "the sum of the partial adjoints"),
    ),
    Bug(
        "sort-given-the-output",
        "backward passes find_topo_sort the output Tensor itself, not a list of roots",
        [
            (
                AUTOGRAD,
                "    for node in reversed(find_topo_sort([output_tensor])):\n",
                "    for node in reversed(find_topo_sort(output_tensor)):\n",
            )
        ],
        caught_by=["test_composite::diamond", "test_broadcast::*"],
        says=("backward called find_topo_sort",),
        slip=("takes a list of nodes", "even when there is one"),
    ),
    Bug(
        "gradients-not-stored",
        "backward computes each node's sum of partial adjoints and passes it on, but stores it nowhere",
        [
            (
                AUTOGRAD,
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n",
                "        adjoint = sum_node_list(node_to_output_grads_list[node])\n",
            ),
            (
                AUTOGRAD,
                "node.op.gradient_as_tuple(node.grad, node)",
                "node.op.gradient_as_tuple(adjoint, node)",
            ),
        ],
        caught_by=["test_composite::partial_adjoints_summed", "test_broadcast::*"],
        says=("got nothing",),
        slip=("without a gradient", "goes in its `grad`"),
    ),
    Bug(
        "topo-no-break",
        "find_topo_sort pushes every unvisited input at once (no `break`), then places the node it "
        "was looping over while popping the last input pushed",
        [
            (
                AUTOGRAD,
                "                    stack.append((inp, iter(inp.inputs)))\n                    break\n",
                "                    stack.append((inp, iter(inp.inputs)))\n",
            )
        ],
        caught_by=["test_topo::topo_chain", "test_topo::topo_diamond", "test_topo::topo_several_outputs"],
        says=("find_topo_sort",),
        slip=("leaves out", "one input at a time"),
    ),
    Bug(
        "topo-skips-leaves",
        "find_topo_sort lists only the nodes made by an op, so backward never stores the leaves' gradients",
        [
            (
                AUTOGRAD,
                "                stack.pop()\n                topo_order.append(node)\n",
                "                stack.pop()\n                if not node.is_leaf():\n"
                "                    topo_order.append(node)\n",
            )
        ],
        caught_by=["test_ops::op_backward[add]", "test_ops::op_backward[mul]"],
        says=("compute_gradient_of_variables",),
        slip=("backward never came to", "the sort must list every node"),
    ),
    Bug(
        "rsub-calls-itself",
        "`2.0 - x` runs x.__rsub__(2.0), which returns other - self: x.__rsub__(2.0) again, without end",
        [
            (
                AUTOGRAD,
                "    def __rsub__(self, other):\n        return ops.AddScalar(other)(ops.Negate()(self))\n",
                "    def __rsub__(self, other):\n        return other - self\n",
            )
        ],
        caught_by=["test_ops::op_backward[rsub]"],
        says=("RecursionError in Tensor.__rsub__",),
        slip=("calls itself again", "hands it back to __rsub__"),
    ),
    Bug(
        "backward-recursive-push",
        "backward pushes each gradient down to the inputs by recursion, one call a node: right on "
        "a small graph (a node reached by two paths gets both), past Python's recursion limit on "
        "the deep chains, where the limit stops it inside a rule it runs",
        [
            (
                AUTOGRAD,
                "    node_to_output_grads_list = {output_tensor: [out_grad]}\n"
                "    for node in reversed(find_topo_sort([output_tensor])):\n"
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n"
                "        if node.is_leaf():\n"
                "            continue\n"
                "        for inp, grad in zip(node.inputs, node.op.gradient_as_tuple(node.grad, node), "
                "strict=True):\n"
                "            node_to_output_grads_list.setdefault(inp, []).append(grad)\n",
                "    def push(node, grad):\n"
                "        node.grad = grad if node.grad is None else node.grad + grad\n"
                "        if node.is_leaf():\n"
                "            return\n"
                "        for inp, g in zip(node.inputs, node.op.gradient_as_tuple(grad, node), "
                "strict=True):\n"
                "            push(inp, g)\n\n"
                "    for node in find_topo_sort([output_tensor]):\n"
                "        node.grad = None\n"
                "    push(output_tensor, out_grad)\n",
            )
        ],
        caught_by=["test_topo::deep_chain", "test_topo::chain_of_a_hundred_thousand"],
        says=("RecursionError in compute_gradient_of_variables.push",),
        slip=("iteration, not recursion",),
    ),
    Bug(
        "backward-walks-its-own-order",
        "backward ignores find_topo_sort and orders the nodes itself, as micrograd's build_topo "
        "does but without `visited`: a node is processed once per path to it",
        [
            (
                AUTOGRAD,
                "    for node in reversed(find_topo_sort([output_tensor])):\n",
                "    order = []\n\n"
                "    def build(v):\n"
                "        for child in v.inputs:\n"
                "            build(child)\n"
                "        order.append(v)\n\n"
                "    build(output_tensor)\n"
                "    for node in reversed(order):\n",
            )
        ],
        caught_by=[
            "test_broadcast::broadcast_twice",
            "test_summation::mean_and_variance",
            "test_composite::diamond",  # each node's gradient a different multiple
            "test_composite::sgd_steps",  # a gradient read inside the case
        ],
        says=("more than once",),
        slip=("more than once", "in the order find_topo_sort gives"),
    ),
    Bug(
        "backward-skips-leaves",
        "backward leaves the leaves without a gradient: it skips them before storing their sum",
        [
            (
                AUTOGRAD,
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n"
                "        if node.is_leaf():\n            continue\n",
                "        if node.is_leaf():\n            continue\n"
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n",
            )
        ],
        caught_by=[
            "test_ops::op_backward[add]",
            "test_broadcast::bias_add",
            "test_composite::sgd_steps",  # reads a gradient backward left unset: the account
            "test_detach::detach_mid_graph",  # nothing reached w, through the detach() or otherwise
        ],
        says=("backward",),
        slip=("find_topo_sort lists", "the leaves too"),
    ),
    Bug(
        "backward-pairs-reversed",
        "backward gives each rule's gradients to the node's inputs in reverse order",
        [
            (
                AUTOGRAD,
                "zip(node.inputs, node.op.gradient_as_tuple(node.grad, node), strict=True)",
                "zip(node.inputs, reversed(node.op.gradient_as_tuple(node.grad, node)), strict=True)",
            )
        ],
        caught_by=[
            "test_broadcast::scalar_times_matrix",
            "test_composite::diamond",
            "test_composite::two_layer_network",  # an input got another's shape: the account
            "test_detach::detach_mid_graph",  # not a gradient through the detach()
        ],
        says=("backward",),
        slip=("inputs in another order", "node.inputs[i]"),
    ),
    Bug(
        "topo-pre-order",
        "find_topo_sort appends a node before its inputs (pre-order)",
        [
            (
                AUTOGRAD,
                "        visited.add(root)\n",
                "        visited.add(root)\n        topo_order.append(root)\n",
            ),
            (
                AUTOGRAD,
                "                    visited.add(inp)\n",
                "                    visited.add(inp)\n                    topo_order.append(inp)\n",
            ),
            (
                AUTOGRAD,
                "                stack.pop()\n                topo_order.append(node)\n",
                "                stack.pop()\n",
            ),
        ],
        caught_by=["test_topo::topo_chain", "test_topo::topo_diamond", "test_composite::diamond"],
        says=("post-order",),
        slip=("post-order",),
    ),
    Bug(
        "backward-ignores-out-grad",
        "backward seeds the output with ones whatever out_grad it is given",
        [
            (
                AUTOGRAD,
                "    node_to_output_grads_list = {output_tensor: [out_grad]}",
                "    node_to_output_grads_list = {output_tensor: [init.ones_like(output_tensor)]}",
            )
        ],
        caught_by=["test_ops::op_backward[mul]", "test_matmul::matmul[2d]"],
        says=("out_grad",),
        slip=("out_grad",),
    ),
    Bug(
        "gradient-detached",
        "backward stores each gradient detached from the graph, which a backward through it cannot "
        "differentiate",
        [
            (
                AUTOGRAD,
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n",
                "        node.grad = sum_node_list(node_to_output_grads_list[node]).detach()\n",
            )
        ],
        caught_by=["test_higher_order::power_second_derivative", "test_higher_order::gradient_norm"],
        says=("backward", "compute_gradient_of_variables"),
        slip=("a new leaf", "cut off from the graph"),
    ),
    Bug(
        "output-adjoint-unrecorded",
        "backward starts its record of partial adjoints empty, without out_grad for the output",
        [
            (
                AUTOGRAD,
                "    node_to_output_grads_list = {output_tensor: [out_grad]}\n",
                "    node_to_output_grads_list = {}\n",
            )
        ],
        caught_by=["test_ops::op_backward[add]", "test_composite::partial_adjoints_summed"],
        says=("no partial adjoint for the output itself", "out_grad"),
    ),
    Bug(
        "grad-stored-as-list",
        "backward stores each node's list of partial adjoints as its grad, and sums it only to pass it on",
        [
            (
                AUTOGRAD,
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n",
                "        node.grad = node_to_output_grads_list[node]\n",
            ),
            (
                AUTOGRAD,
                "node.op.gradient_as_tuple(node.grad, node)",
                "node.op.gradient_as_tuple(sum_node_list(node.grad), node)",
            ),
        ],
        caught_by=["test_ops::op_backward[add]", "test_composite::partial_adjoints_summed"],
        says=("backward stored a node's grad as a list of", "the sum of the partial adjoints"),
    ),
    Bug(
        "grads-accumulate-across-backward",
        "backward adds to the gradient of an earlier backward instead of assigning it",
        [
            (
                AUTOGRAD,
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n",
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n"
                "        if getattr(node, 'previous_grad', None) is not None:\n"
                "            node.grad = node.grad + node.previous_grad\n"
                "        node.previous_grad = node.grad\n",
            )
        ],
        caught_by=[
            "test_composite::backward_twice_assigns",
            "test_composite::backward_of_two_outputs",
            "test_higher_order::power_second_derivative",  # x.grad = PyTorch's + grad(x) read before
            "test_higher_order::gradient_norm",  # every node of the first graph carries its gradient over
            "test_hidden_graph::hidden_mixed_partials",
        ],
        says=("earlier backward",),
        slip=("replacing",),
    ),
    Bug(
        "detach-keeps-inputs",
        "detach() returns a node that keeps the op and the inputs (only requires_grad is off)",
        [
            (
                AUTOGRAD,
                "        return Tensor.make_const(self.realize_cached_data())\n",
                "        value = Tensor.__new__(Tensor)\n"
                "        value._init(self.op, self.inputs,"
                " cached_data=self.realize_cached_data(), requires_grad=False)\n"
                "        return value\n",
            )
        ],
        caught_by=[
            "test_detach::no_gradient_through_detach",
            "test_detach::detached_is_a_leaf",
            "test_detach::accumulation_loop",
        ],
        says=("detach()",),
        slip=("new leaf",),
    ),
    Bug(
        "numpy-gradients",
        "gradient rules compute on NumPy arrays and wrap the result: right once, not differentiable again",
        [
            (
                OPS,
                "        lhs, rhs = node.inputs\n        return out_grad * rhs, out_grad * lhs",
                "        lhs, rhs = node.inputs\n"
                "        return Tensor(out_grad.numpy() * rhs.numpy()),"
                " Tensor(out_grad.numpy() * lhs.numpy())",
            ),
            (
                OPS,
                "        return out_grad * power_scalar(a, self.scalar - 1) * self.scalar",
                "        return Tensor(out_grad.numpy() * self.scalar * a.numpy() ** (self.scalar - 1))",
            ),
            (
                OPS,
                "        return out_grad * (1 - node**2)",
                "        return Tensor(out_grad.numpy() * (1 - node.numpy() ** 2))",
            ),
        ],
        caught_by=[
            "test_higher_order::power_second_derivative",
            "test_higher_order::gradient_norm",
            "test_higher_order::matmul_second_order",
        ],
        says=("from a backward through a gradient",),
        slip=("gradient is computed in NumPy and wrapped in a Tensor",),
    ),
    Bug(
        "tanh-gradient-in-numpy",
        "Tanh's gradient alone is computed in NumPy and wrapped: right once, not differentiable again",
        [
            (
                OPS,
                "        return out_grad * (1 - node**2)",
                "        return Tensor(out_grad.numpy() * (1 - node.numpy() ** 2))",
            )
        ],
        caught_by=[
            "test_higher_order::gradient_norm",
            "test_higher_order::matmul_second_order",
            "test_higher_order::hessian_vector_product",
        ],
        says=("from a backward through a gradient", "Tanh"),
        slip=("Tanh's gradient is computed in NumPy",),
    ),
    Bug(
        "summation-times-numpy-array",
        "Summation's gradient multiplies by a NumPy array of ones to broadcast: right once, and a "
        "backward through it cannot undo that broadcast",
        [
            (
                OPS,
                "        return broadcast_to(reshape(out_grad, kept_shape), in_shape)",
                "        return reshape(out_grad, kept_shape) * numpy.ones(in_shape)",
            )
        ],
        caught_by=[
            "test_higher_order::matmul_second_order",
            "test_hidden_graph::hidden_softmax_second_order",
            "test_hidden_graph::hidden_lazy_higher_order",
        ],
        says=("Summation.gradient",),
        slip=("Summation's gradient multiplies by a NumPy array",),
    ),
    Bug(
        "lazy-mode-ignored",
        "ops compute their data at once even in lazy mode",
        [
            (
                AUTOGRAD,
                "        if not LAZY_MODE:\n"
                "            if not value.requires_grad:\n"
                "                return cls.make_const(value.realize_cached_data())\n"
                "            value.realize_cached_data()\n",
                "        if not value.requires_grad:\n"
                "            return cls.make_const(value.realize_cached_data())\n"
                "        value.realize_cached_data()\n",
            )
        ],
        caught_by=[
            "test_lazy::nothing_computed_until_asked",
            "test_lazy::lazy_equals_eager",
            "test_lazy::lazy_constants_stay_ops",
        ],
        says=("lazy mode",),
        slip=("realize_cached_data",),
    ),
    Bug(
        "divide-multiplies-for-a",
        "EWiseDiv's gradient for the dividend multiplies out_grad by the divisor",
        [
            (
                OPS,
                "        return out_grad / b, -out_grad * a / b**2",
                "        return out_grad * b, -out_grad * a / b**2",
            )
        ],
        caught_by=["test_op_gradients::op_gradient[EWiseDiv]", "test_ops::op_backward[div]"],
        says=("EWiseDiv",),
        slip=("multiplies out_grad by b", "1 / b"),
    ),
    Bug(
        "divide-sign",
        "EWiseDiv's gradient for the divisor lost its minus sign",
        [
            (
                OPS,
                "        return out_grad / b, -out_grad * a / b**2",
                "        return out_grad / b, out_grad * a / b**2",
            )
        ],
        caught_by=[
            "test_op_gradients::op_gradient[EWiseDiv]",
            "test_ops::op_backward[div]",
            "test_finite_differences::fd_quotients",  # b's partial adjoint, mixed with others in the case
        ],
        says=("EWiseDiv",),
        slip=("gradient has the wrong sign",),
    ),
    Bug(
        "divisor-not-squared",
        "EWiseDiv's gradient for the divisor divides by b where the derivative divides by b**2",
        [
            (
                OPS,
                "        return out_grad / b, -out_grad * a / b**2",
                "        return out_grad / b, -out_grad * a / b",
            )
        ],
        caught_by=["test_op_gradients::op_gradient[EWiseDiv]", "test_ops::op_backward[div]"],
        says=("EWiseDiv",),
        slip=("divides by b once", "-a / b**2"),
    ),
    Bug(
        "transpose-ignores-axes",
        "Transpose's gradient always swaps the last two axes, whatever axes were swapped",
        [(OPS, "        return transpose(out_grad, self.axes)", "        return transpose(out_grad)")],
        caught_by=[
            "test_op_gradients::op_gradient[Transpose-axes]",
            "test_reshape_transpose::transpose[axes-01]",
        ],
        says=("Transpose",),
        slip=("swaps the last two axes whatever axes the op swapped",),
    ),
    Bug(
        "reshape-gradient-wrong-shape",
        "Reshape's gradient reshapes out_grad to the output's shape (a no-op) instead of the input's",
        [
            (
                OPS,
                "        return reshape(out_grad, node.inputs[0].shape)",
                "        return reshape(out_grad, node.shape)",
            )
        ],
        caught_by=["test_op_gradients::op_gradient[Reshape]", "test_reshape_transpose::reshape[merge]"],
        says=("Reshape", "a gradient must have its input's shape"),
        slip=("reshape out_grad back",),
    ),
    Bug(
        "relu-gradient-at-zero",
        "ReLU's gradient is 1 at exactly 0 (PyTorch and needle say 0)",
        [
            (
                OPS,
                "        mask = Tensor(a > 0, dtype=a.dtype, requires_grad=False)",
                "        mask = Tensor(a >= 0, dtype=a.dtype, requires_grad=False)",
            )
        ],
        caught_by=["test_op_gradients::op_gradient[ReLU]", "test_ops::op_backward[relu]"],
        says=("ReLU",),
        slip=("slope at 0", "`a > 0`"),
    ),
    Bug(
        "relu-gradient-times-output",
        "ReLU's gradient multiplies out_grad by ReLU's output where its slope is a mask",
        [(OPS, "        return out_grad * mask\n", "        return out_grad * node\n")],
        caught_by=["test_op_gradients::op_gradient[ReLU]", "test_ops::op_backward[relu]"],
        says=("ReLU",),
        slip=("ReLU's output (node)", "slope is 1"),
    ),
    Bug(
        "log-divides-by-output",
        "Log's gradient divides by the output log(a) instead of the input a",
        [(OPS, "        return out_grad / node.inputs[0]", "        return out_grad / node")],
        caught_by=["test_op_gradients::op_gradient[Log]", "test_ops::op_backward[log]"],
        says=("Log",),
        slip=("Log's gradient uses its output (node)",),
    ),
    Bug(
        "exp-uses-input",
        "Exp's gradient multiplies by the input a where the derivative of exp(a) is the output",
        [(OPS, "        return out_grad * node\n", "        return out_grad * node.inputs[0]\n")],
        caught_by=["test_op_gradients::op_gradient[Exp]", "test_ops::op_backward[exp]"],
        says=("Exp",),
        slip=("Exp's gradient uses its input",),
    ),
    Bug(
        "power-exponent-without-log",
        "EWisePow's gradient for the exponent forgets the factor log(a)",
        [(OPS, "out_grad * node * log(a)", "out_grad * node")],
        caught_by=["test_op_gradients::op_gradient[EWisePow]", "test_ops::op_backward[pow_tensor]"],
        says=("EWisePow",),
        slip=("misses the factor log(a)",),
    ),
    Bug(
        "power-base-off-by-one",
        "EWisePow's gradient for the base a takes a to the power b, not b - 1",
        [(OPS, "out_grad * b * power(a, b - 1)", "out_grad * b * power(a, b)")],
        caught_by=["test_op_gradients::op_gradient[EWisePow]", "test_ops::op_backward[pow_tensor]"],
        says=("EWisePow",),
        slip=("takes a to the wrong power",),
    ),
    Bug(
        "tanh-derivative",
        "Tanh's gradient uses 1 - tanh instead of 1 - tanh**2",
        [(OPS, "        return out_grad * (1 - node**2)", "        return out_grad * (1 - node)")],
        caught_by=["test_op_gradients::op_gradient[Tanh]", "test_ops::op_backward[tanh]"],
        says=("Tanh",),
        slip=("the derivative is 1 - t**2",),
    ),
    Bug(
        "recursive-topo",
        "find_topo_sort recurses: RecursionError on a chain deeper than Python's limit",
        [(AUTOGRAD, ITERATIVE_TOPO, RECURSIVE_TOPO)],
        caught_by=["test_topo::deep_chain", "test_hidden_graph::hidden_deep_backward"],
        says=("RecursionError",),
        slip=("iterative",),
    ),
    Bug(
        "recursive-topo-dfs",
        "find_topo_sort calls a recursive search of its own (topo_sort_dfs): RecursionError on deep chains",
        [(AUTOGRAD, ITERATIVE_TOPO, DFS_CALL), (AUTOGRAD, "def find_topo_sort(node_list):\n", DFS)],
        caught_by=["test_topo::deep_chain", "test_hidden_graph::hidden_deep_backward"],
        says=("RecursionError in topo_sort_dfs", "while running find_topo_sort"),
        slip=("iterative",),
    ),
    Bug(
        "topo-inputs-last-first",
        "find_topo_sort visits a node's inputs last to first: a topological order, not the contract's",
        [
            (AUTOGRAD, "iter(root.inputs)", "iter(reversed(root.inputs))"),
            (AUTOGRAD, "iter(inp.inputs)", "iter(reversed(inp.inputs))"),
        ],
        caught_by=["test_topo::topo_diamond", "test_hidden_graph::hidden_topo_wide"],
        says=("the contract",),
        slip=("inputs in order",),
    ),
    Bug(
        "output-grad-unset",
        "backward computes every gradient right but leaves the output's own grad unset",
        [
            (
                AUTOGRAD,
                "        node.grad = sum_node_list(node_to_output_grads_list[node])\n",
                "        total = sum_node_list(node_to_output_grads_list[node])\n"
                "        if node is not output_tensor:\n"
                "            node.grad = total\n",
            ),
            (
                AUTOGRAD,
                "node.op.gradient_as_tuple(node.grad, node)",
                "node.op.gradient_as_tuple(total, node)",
            ),
        ],
        caught_by=["test_composite::output_gradient"],
        says=("y.grad",),
        slip=("every gradient but the output's own",),
    ),
    Bug(
        "relu-mask-float64",
        "ReLU's gradient multiplies by a float64 mask: right numbers, float64 for a float32 input",
        [
            (
                OPS,
                "        mask = Tensor(a > 0, dtype=a.dtype, requires_grad=False)",
                '        mask = Tensor(a > 0, dtype="float64", requires_grad=False)',
            )
        ],
        caught_by=["test_op_gradients::op_gradient_float32[ReLU]"],
        says=("ReLU",),
        slip=("keeps its input's dtype",),
    ),
    Bug(
        "mul-gradients-swapped",
        "EWiseMul's gradient returns each input's own product: `out_grad * lhs, out_grad * rhs`",
        [
            (
                OPS,
                "        return out_grad * rhs, out_grad * lhs\n",
                "        return out_grad * lhs, out_grad * rhs\n",
            )
        ],
        caught_by=[
            "test_op_gradients::op_gradient[EWiseMul]",
            "test_op_gradients::op_gradient_float32[EWiseMul]",
            # in a backward, where the inputs' results mix other ops' contributions: the probe says it
            "test_composite::diamond",
            "test_composite::partial_adjoints_summed",
        ],
        says=("EWiseMul",),
        slip=("the other's gradient", "node.inputs[i]"),
    ),
    Bug(
        "matmul-gradient-factors-swapped",
        "MatMul's gradient for a multiplies in the wrong order: `matmul(transpose(b), out_grad)`",
        [
            (
                OPS,
                "        grad_a = matmul(out_grad, transpose(b))\n",
                "        grad_a = matmul(transpose(b), out_grad)\n",
            )
        ],
        caught_by=[
            "test_op_gradients::op_gradient[MatMul]",
            "test_op_gradients::op_gradient[MatMul-batched]",
        ],
        says=("MatMul.gradient",),
        slip=("do not line up", "out_grad @ b^T"),
    ),
    Bug(
        "matmul-gradient-without-transposes",
        "MatMul's gradient multiplies out_grad by the factors as they are, without transposing them",
        [
            (
                OPS,
                "        grad_a = matmul(out_grad, transpose(b))\n"
                "        grad_b = matmul(transpose(a), out_grad)\n",
                "        grad_a = matmul(out_grad, b)\n        grad_b = matmul(a, out_grad)\n",
            )
        ],
        # in a backward too: the out_grad backward gave the rule has its node's shape, so the
        # misaligned factors are the rule's own
        caught_by=[
            "test_op_gradients::op_gradient[MatMul]",
            "test_composite::two_layer_network",
            "test_matmul::*",
        ],
        says=("MatMul.gradient",),
        slip=("do not line up", "out_grad @ b^T"),
    ),
    Bug(
        "broadcast-gradient-sums-everything",
        "BroadcastTo's gradient sums out_grad over every axis, then reshapes the one number",
        [
            (
                OPS,
                "        return _sum_to_shape(out_grad, node.inputs[0].shape)\n",
                "        return reshape(summation(out_grad), node.inputs[0].shape)\n",
            )
        ],
        caught_by=[
            "test_broadcast::broadcast_gradient[stretch-last]",
            "test_broadcast::broadcast_gradient[prepend]",
        ],
        says=("BroadcastTo.gradient",),
        slip=("over every axis", "stretched from size 1"),
    ),
    Bug(
        "tensor-eq-unhashable",
        "Tensor defines __eq__, so Python takes its __hash__ away: no set or dict can hold a node",
        [
            (
                AUTOGRAD,
                'class Tensor(Value):\n    grad: "Tensor"\n',
                'class Tensor(Value):\n    grad: "Tensor"\n\n'
                "    def __eq__(self, other):\n        return self is other\n",
            )
        ],
        caught_by=["test_topo::*", "test_composite::*"],
        says=("TypeError", "unhashable"),
        slip=("must be hashable", "__hash__ = object.__hash__"),
    ),
]
