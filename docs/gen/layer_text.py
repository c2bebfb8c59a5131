"""What the ``layers`` and ``code`` views' columns and options mean (``view_text`` holds the
other views')."""

from __future__ import annotations

LAYERS_COLUMNS: dict[str, str] = {
    "name": "the layer as the user named it where the adapter recorded the model "
    "(`hidden1`), else its type with its ordinal among same-typed siblings (`Linear 2`); "
    "`(no layer)`: the forward and backward work outside every layer; with `params`, also "
    "a weight's name in its layer (`weight`)",
    "path": "the layer key: layer types from the outermost layer, each with its call "
    "ordinal (`mlp[1]/linear[2]`); a weight's row adds its name",
    "depth": "1 for the outermost layers, one more per layer around it",
    "level": "the row's indentation in the tree: `depth - 1`",
    "calls_per_step": "calls of the layer per step",
    "host_own_ns": "the layer's share of the forward and backward phases: its ops (a "
    "backward op in the layer of the forward op it differentiates) and the time between "
    "them inside the layer, not its child layers'",
    "host_with_children_ns": "`host_own_ns` of the layer and every layer inside it",
    "gpu_own_ns": "device time of the kernels the layer's own ops launched in the forward "
    "and backward phases; NaN when the run recorded no device events",
    "gpu_with_children_ns": "`gpu_own_ns` of the layer and every layer inside it",
    "model_gflops_own": "model FLOPs (GEMMs, convolutions, attention, recurrent layers; "
    "forward and backward; as the `mfu` view) of the layer's own ops, in 10⁹ FLOP",
    "model_gflops_with_children": "`model_gflops_own` of the layer and every layer inside it",
    "params_own": "parameters (elements) the layer holds itself, and those of sub-layers it "
    "never called (a module list's members), shared ones counted once; NaN when the run "
    "recorded no model",
    "params_with_children": "`params_own` of the layer and every layer inside it",
    "params_own_bytes": "bytes of `params_own`",
    "params_with_children_bytes": "bytes of `params_with_children`",
    "allocated_own_bytes": "bytes allocated per step (memory events, torch "
    "`profile_memory=True`) in the forward and backward phases by the layer's own ops (a "
    "backward op's in its forward op's layer); NaN when the run recorded no memory events",
    "allocated_with_children_bytes": "`allocated_own_bytes` of the layer and every layer "
    "inside it",
    "shape": "a weight's shape (`784x128`; only with `params`)",
    "dtype": "a weight's element type (only with `params`)",
}

LAYERS_OPTIONS: dict[object, str] = {
    "max_depth": "show layers down to this depth (1: the outermost layers)",
    ("code", "order_by"): "order the functions by this column, largest first (default: "
    "`host_with_children_ns`)",
    ("code", "filter"): "keep the functions whose name this regular expression matches "
    "(anywhere, case-insensitive)",
    "order_by": "order each layer's children by this column, largest first (`name` and "
    "`path` alphabetically), or by a figure's total (`calls`, `host`, `gpu`, `flops`, "
    "`params`, `bytes`, `memory`; `params` is `params_with_children`, as tfprof's `-order_by params`); "
    "default: the order of their first call",
    ("layers", "filter"): "keep the layers whose name or path this regular expression matches "
    "(anywhere, case-insensitive), or that ran an op whose type it matches (`aten::addmm`, "
    "`MatMul`; a backward op in the layer of the forward op it differentiates), with the "
    "layers around them; each layer keeps all its figures",
    "step": "this step alone instead of the mean over the steps",
    "params": "list each weight, with its shape and dtype, under its layer",
    "select": "only these figures, comma-separated: `calls`, `host`, `gpu`, `flops`, `params`, "
    "`bytes`, `memory` (default: all)",
}

CODE_COLUMNS: dict[str, str] = {
    "name": "the function as `function (file:LINE)`, `LINE` the line it starts on (angle "
    "brackets shown as square ones: `[module]`); a built-in as `built-in: Type.method`",
    "function": "the function's name as recorded",
    "file": "its source file as recorded; empty for built-ins",
    "line": "the line the function starts on; 0 for built-ins",
    "calls_per_step": "calls of the function per step",
    "host_own_ns": "the calls' time outside the Python frames they call (their own Python, and "
    "the ops and C calls they make directly): pprof's *flat*",
    "host_with_children_ns": "the own time of the calls and of every frame they call, a "
    "recursive call counted once: pprof's *cum*",
}
