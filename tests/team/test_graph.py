"""Tests for hdppo.team.graph: building agent graphs, querying them, spatial grouping and validation."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from hdppo.errors import GraphError, ScenarioError
from hdppo.team.graph import AgentGraph, SpatialGrouping, spatial_groups

UNITS = [f"u{i}" for i in range(6)]


def _layered(edges, layer_of, layers=None) -> AgentGraph:
    """An AgentGraph over a raw DiGraph, so tests can build graphs the helpers refuse to build."""
    g = nx.DiGraph()
    for node, layer in layer_of.items():
        if layer is None:
            g.add_node(node)
        else:
            g.add_node(node, layer=layer)
    g.add_edges_from(edges)
    return AgentGraph(g, layers)


def _error(graph: AgentGraph, *args, **kwargs) -> GraphError:
    with pytest.raises(GraphError) as info:
        graph.validate(*args, **kwargs)
    return info.value


# ---- construction helpers ---------------------------------------------------------------------
def test_groups_makes_commander_squads_units() -> None:
    g = AgentGraph.groups(UNITS, [3])
    assert g.layers == ["high", "mid", "low"]
    assert g.nodes("high") == ["high_0"]
    assert g.nodes("mid") == ["mid_0", "mid_1"]
    assert g.units == UNITS
    assert g.children("high_0") == ["mid_0", "mid_1"]
    assert g.children("mid_0") == ["u0", "u1", "u2"]
    assert g.children("mid_1") == ["u3", "u4", "u5"]
    assert g.spatial is None
    assert all(g.layer_of(u) == "low" for u in UNITS)
    assert g.graph.number_of_edges() == 2 + 6
    g.validate(UNITS, layer_names=["high", "mid", "low"])


def test_groups_uneven_last_group_and_deeper_tree() -> None:
    g = AgentGraph.groups([f"u{i}" for i in range(7)], [3])
    assert [len(g.children(m)) for m in g.nodes("mid")] == [3, 3, 1]
    deep = AgentGraph.groups(UNITS, [2, 2])
    assert deep.layers[0] == "high" and deep.layers[-1] == "low" and len(deep.layers) == 4
    assert [len(deep.nodes(name)) for name in deep.layers] == [1, 2, 3, 6]
    deep.validate(UNITS)


def test_groups_flat_is_one_layer() -> None:
    g = AgentGraph.groups(UNITS)
    assert g.layers == ["low"]
    assert g.units == UNITS
    assert g.graph.number_of_edges() == 0
    assert g.parent("u0") is None
    assert g.children("u0") == []
    g.validate(UNITS, layer_names=["low"])


def test_groups_two_layers_with_names_and_spatial_flag() -> None:
    g = AgentGraph.groups(UNITS, layers=("top", "unit"))
    assert g.layers == ["top", "unit"]
    assert g.children("top_0") == UNITS
    s = AgentGraph.groups(UNITS, [3], spatial=True)
    assert s.spatial == SpatialGrouping(3)


def test_groups_refuses_bad_sizes_and_names() -> None:
    with pytest.raises(GraphError, match="not positive"):
        AgentGraph.groups(UNITS, [0])
    with pytest.raises(GraphError, match="3 layers but 2 names") as info:
        AgentGraph.groups(UNITS, [3], layers=("high", "low"))
    assert "fix:" in str(info.value)


def test_by_attribute_groups_by_team() -> None:
    team = {"u0": "red", "u1": "blue", "u2": "red", "u3": "blue", "u4": "red", "u5": "green"}
    g = AgentGraph.by_attribute(UNITS, team)
    assert g.layers == ["high", "mid", "low"]
    assert g.nodes("mid") == ["mid_red", "mid_blue", "mid_green"]
    assert g.children("mid_red") == ["u0", "u2", "u4"]
    assert g.children("mid_blue") == ["u1", "u3"]
    assert g.children("mid_green") == ["u5"]
    assert g.parent("mid_blue") == "high_0"
    g.validate(UNITS)


def test_by_attribute_accepts_a_function() -> None:
    g = AgentGraph.by_attribute(["tank_0", "scout_0", "tank_1"], lambda u: u.split("_")[0])
    assert g.children("mid_tank") == ["tank_0", "tank_1"]
    assert g.children("mid_scout") == ["scout_0"]


def test_from_edges_infers_layers_top_to_bottom() -> None:
    layer_of = {"c": "high", "s0": "mid", "s1": "mid", "a": "low", "b": "low", "d": "low"}
    g = AgentGraph.from_edges([("s1", "d"), ("c", "s0"), ("s0", "a"), ("c", "s1"), ("s0", "b")], layer_of)
    assert g.layers == ["high", "mid", "low"]
    assert g.units == ["a", "b", "d"]
    g.validate(["a", "b", "d"])


def test_from_edges_refuses_a_node_without_layer() -> None:
    with pytest.raises(GraphError, match="'ghost'") as info:
        AgentGraph.from_edges([("c", "ghost")], {"c": "high"})
    assert "fix: add 'ghost' to layer_of" in str(info.value)


# ---- queries --------------------------------------------------------------------------------
def test_parent_and_children_follow_index_order() -> None:
    # node order in a layer is the order of layer_of; edges arrive in a scrambled order
    layer_of = {"top": "high", "sq_a": "mid", "sq_b": "mid", "x": "low", "y": "low", "z": "low", "w": "low"}
    edges = [("sq_b", "w"), ("sq_a", "z"), ("top", "sq_b"), ("sq_a", "x"), ("top", "sq_a"), ("sq_b", "y")]
    g = AgentGraph.from_edges(edges, layer_of, ["high", "mid", "low"])
    assert g.nodes("mid") == ["sq_a", "sq_b"]
    assert g.children("top") == ["sq_a", "sq_b"]
    assert g.children("sq_a") == ["x", "z"]
    assert g.children("sq_b") == ["y", "w"]
    assert g.parent("w") == "sq_b"
    assert g.parent("sq_a") == "top"
    assert g.parent("top") is None
    assert g.layer_of("sq_b") == "mid"
    assert g.max_children("mid") == 2


def test_descendant_and_living_units() -> None:
    g = AgentGraph.groups(UNITS, [3])
    assert g.descendant_units("high_0") == UNITS
    assert g.descendant_units("mid_1") == ["u3", "u4", "u5"]
    assert g.descendant_units("u2") == ["u2"]
    alive = {"u5", "u0", "u3"}
    assert g.living_descendants("high_0", alive) == ["u0", "u3", "u5"]
    assert g.living_descendants("mid_1", alive) == ["u3", "u5"]
    assert g.living_descendants("mid_0", iter(["u0"])) == ["u0"]
    assert g.living_descendants("mid_0", set()) == []
    assert g.living_descendants("u4", alive) == []


def test_child_index_arrays_and_masks() -> None:
    g = AgentGraph.groups([f"u{i}" for i in range(7)], [3])
    idx, mask = g.child_index("mid")
    assert idx.dtype == np.int64 and mask.dtype == bool
    assert idx.shape == mask.shape == (3, 3)
    np.testing.assert_array_equal(mask, [[True, True, True], [True, True, True], [True, False, False]])
    np.testing.assert_array_equal(idx[mask], [0, 1, 2, 3, 4, 5, 6])
    top_idx, top_mask = g.child_index("high")
    np.testing.assert_array_equal(top_idx, [[0, 1, 2]])
    assert top_mask.all()


def test_child_index_uses_positions_in_the_layer_below() -> None:
    layer_of = {"h": "high", "m0": "mid", "m1": "mid", "a": "low", "b": "low", "c": "low"}
    g = AgentGraph.from_edges([("h", "m1"), ("h", "m0"), ("m1", "a"), ("m0", "c"), ("m0", "b")], layer_of)
    idx, mask = g.child_index("mid")
    # m0 -> b (1), c (2); m1 -> a (0)
    np.testing.assert_array_equal(idx[0][mask[0]], [1, 2])
    np.testing.assert_array_equal(idx[1][mask[1]], [0])
    np.testing.assert_array_equal(mask, [[True, True], [True, False]])


# ---- spatial grouping ---------------------------------------------------------------------------
def test_spatial_groups_puts_near_points_together() -> None:
    # two clusters of three, interleaved in unit order
    pos = np.array([[10.0, 10.0], [0.0, 0.0], [10.2, 9.9], [0.1, 0.3], [9.8, 10.1], [-0.2, 0.1]])
    group = spatial_groups(pos, 3)
    assert group.dtype == np.int64 and group.shape == (6,)
    assert sorted(np.bincount(group).tolist()) == [3, 3]
    assert len({group[i] for i in (1, 3, 5)}) == 1
    assert len({group[i] for i in (0, 2, 4)}) == 1
    assert group[1] != group[0]
    # the cluster with the smallest (x, y) seeds group 0
    assert group[5] == 0
    np.testing.assert_array_equal(spatial_groups(pos, 3), group)
    np.testing.assert_array_equal(spatial_groups(pos.copy(), 3), group)


def test_spatial_groups_sizes_and_nan_last() -> None:
    rng = np.random.default_rng(0)
    pos = rng.normal(size=(7, 2))
    group = spatial_groups(pos, 3)
    assert np.bincount(group).tolist() == [3, 3, 1]
    pos[2] = np.nan
    group = spatial_groups(pos, 3)
    assert group[2] == 2 and np.bincount(group).tolist() == [3, 3, 1]
    assert sorted(spatial_groups(pos, 1).tolist()) == list(range(7))
    assert spatial_groups(pos, 10).tolist() == [0] * 7


# ---- validation -------------------------------------------------------------------------------
def test_validation_errors_are_scenario_errors() -> None:
    assert issubclass(GraphError, ScenarioError)


def test_cycle_is_named() -> None:
    g = _layered([("h", "m"), ("m", "a"), ("a", "h")], {"h": "high", "m": "mid", "a": "low"}, ["high", "mid", "low"])
    err = _error(g)
    assert "cycle" in err.problem and "h -> m -> a -> h" in err.problem
    assert err.fix and "fix:" in str(err)


def test_child_two_layers_below_its_parent() -> None:
    g = AgentGraph.from_edges([("h", "m"), ("m", "a"), ("h", "b")],
                              {"h": "high", "m": "mid", "a": "low", "b": "low"})
    err = _error(g, ["a", "b"])
    assert "'b'" in err.problem and "'h'" in err.problem and "exactly one layer below" in err.problem
    assert "fix:" in str(err) and "layer just above" in err.fix


def test_node_without_layer_attribute() -> None:
    g = _layered([("h", "a"), ("h", "x")], {"h": "high", "a": "low", "x": None}, ["high", "low"])
    err = _error(g, ["a", "x"])
    assert "'x'" in err.problem and "no 'layer' attribute" in err.problem
    assert "graph.add_node('x', layer=NAME)" in err.fix


def test_node_in_a_layer_the_graph_does_not_list() -> None:
    g = _layered([("h", "a")], {"h": "boss", "a": "low"}, ["high", "low"])
    err = _error(g)
    assert "'h'" in err.problem and "'boss'" in err.problem
    assert "fix:" in str(err)


def test_leaf_that_is_not_an_env_agent() -> None:
    g = AgentGraph.groups(["agent_0", "agent_1", "agnet_2"], [2])
    err = _error(g, ["agent_0", "agent_1", "agent_2"])
    assert "'agnet_2'" in err.problem and "not an agent of the env" in err.problem
    assert "possible_agents" in err.fix


def test_env_agent_missing_from_graph() -> None:
    g = AgentGraph.groups(["agent_0", "agent_1"])
    err = _error(g, ["agent_0", "agent_1", "agent_2"])
    assert "'agent_2'" in err.problem and "neither in the graph nor" in err.problem
    assert "opponents" in err.fix
    # the same agent listed as an opponent is fine
    g.validate(["agent_0", "agent_1", "agent_2"], opponents=["agent_2"])


def test_empty_layer() -> None:
    g = _layered([], {"a": "low", "b": "low"}, ["high", "low"])
    err = _error(g, ["a", "b"])
    assert "'high'" in err.problem and "no nodes" in err.problem
    assert "layer='high'" in err.fix


def test_node_with_two_parents() -> None:
    layer_of = {"h": "high", "m0": "mid", "m1": "mid", "a": "low", "b": "low"}
    g = AgentGraph.from_edges([("h", "m0"), ("h", "m1"), ("m0", "a"), ("m1", "a"), ("m1", "b")], layer_of)
    err = _error(g, ["a", "b"])
    assert "'a'" in err.problem and "2 parents" in err.problem
    assert "one parent in layer 'mid'" in err.fix


def test_upper_node_without_children() -> None:
    layer_of = {"h": "high", "m0": "mid", "m1": "mid", "a": "low"}
    g = AgentGraph.from_edges([("h", "m0"), ("h", "m1"), ("m0", "a")], layer_of)
    err = _error(g, ["a"])
    assert "'m1'" in err.problem and "no children" in err.problem
    assert "give it children or remove it" in err.fix


def test_layer_names_differ_from_scenario() -> None:
    g = AgentGraph.groups(UNITS, [3])
    err = _error(g, UNITS, layer_names=["commander", "squad", "low"])
    assert "['high', 'mid', 'low']" in err.problem and "['commander', 'squad', 'low']" in err.problem
    assert "Layer specs" in err.fix
    err = _error(AgentGraph.groups(UNITS), UNITS, layer_names=["high", "low"])
    assert "['low']" in err.problem


def test_agent_both_unit_and_opponent() -> None:
    g = AgentGraph.groups(["agent_0", "agent_1"])
    err = _error(g, ["agent_0", "agent_1", "adversary_0"], opponents=["adversary_0", "agent_1"])
    assert "'agent_1'" in err.problem and "both a unit of the graph and an opponent" in err.problem
    assert "one side" in err.fix


def test_valid_graph_with_opponents_passes() -> None:
    g = AgentGraph.groups(["adversary_0", "adversary_1"], [1])
    g.validate(["adversary_0", "adversary_1", "agent_0"], opponents=["agent_0"],
               layer_names=["high", "mid", "low"])     # raises GraphError if anything is wrong
    assert g.units == ["adversary_0", "adversary_1"] and "agent_0" not in g.graph


def test_team_builds_flat_commander_and_squad_depths():
    units = [f"u{i}" for i in range(5)]
    assert AgentGraph.team(units, 1, 2).layers == ["low"]
    two = AgentGraph.team(units, 2, 2)
    assert two.layers == ["high", "low"] and sorted(two.children("high_0")) == sorted(units)
    three = AgentGraph.team(units, 3, 2)
    assert three.layers == ["high", "mid", "low"]
    assert [len(three.children(s)) for s in three.nodes("mid")] == [2, 2, 1]
    with pytest.raises(GraphError, match="depth 4"):
        AgentGraph.team(units, 4, 2)
