"""engine/records.py: the engine's records behave as the dataclasses they
replace (equality, hashing, ordering, repr, replace, immutability, pickling,
defaults and factories), so swapping them changed nothing but speed."""
import copy
import dataclasses
import pickle

import pytest

from pallas_lsp.engine.model import Const, Ref, Span, Value
from pallas_lsp.engine.records import FrozenInstanceError, frozen, record, replace


def _pair(decorate_ours, decorate_theirs):
    """The same class body made by records and by dataclasses."""
    def body(base):
        class Point(base):
            x: int
            y: int = 0
            tag: object = dataclasses.field(default=None, compare=False, repr=False)
        return Point

    class Base:
        pass

    ours = decorate_ours(body(Base))
    theirs = decorate_theirs(body(Base))
    return ours, theirs


SAMPLES = [(1,), (1, 2), (2, 1), (1, 2, "a"), (1, 2, "b"), (0, 0, [1])]


def test_frozen_matches_a_frozen_ordered_dataclass():
    ours, theirs = _pair(frozen(order=True), dataclasses.dataclass(frozen=True, order=True))
    for a in SAMPLES:
        for b in SAMPLES:
            o1, o2 = ours(*a), ours(*b)
            t1, t2 = theirs(*a), theirs(*b)
            assert (o1 == o2) == (t1 == t2)
            assert (o1 < o2) == (t1 < t2) and (o1 >= o2) == (t1 >= t2)
            if o1 == o2:
                assert hash(o1) == hash(o2)  # `tag` is not compared, nor hashed
        assert repr(ours(*a)).replace("Point", "") == repr(theirs(*a)).replace("Point", "")
    p = ours(1, 2, "t")
    with pytest.raises(FrozenInstanceError):
        p.x = 3
    with pytest.raises(FrozenInstanceError):
        del p.y
    moved = replace(p, y=5)
    assert (moved.x, moved.y, moved.tag) == (1, 5, "t") and p.y == 2
    assert copy.deepcopy(p) == p and copy.deepcopy(p) is not p
    assert ours(1) != theirs(1)  # another class: not equal, as between dataclasses
    with pytest.raises(TypeError):
        ours()  # `x` has no default


def test_record_matches_a_mutable_dataclass():
    @record
    class Bag:
        name: str
        items: list = dataclasses.field(default_factory=list)

    a, b = Bag("a"), Bag("a")
    assert a == b and a.items is not b.items  # a fresh list each
    a.items.append(1)
    assert a != b
    a.name = "z"  # mutable
    assert a.name == "z"
    with pytest.raises(TypeError):
        hash(a)  # equal by value and mutable: unhashable, as a dataclass
    given = [7]
    assert Bag("c", given).items is given
    assert repr(Bag("q", [1])) == "test_record_matches_a_mutable_dataclass.<locals>.Bag(" \
        "name='q', items=[1])"


def test_engine_values_keep_their_identity_rules():
    # `decl` (go to the spec) is not part of a Ref's identity.
    assert Ref(origin="x", decl=1) == Ref(origin="x", decl=2)
    assert hash(Ref(origin="x", decl=1)) == hash(Ref(origin="x", decl=2))
    assert Ref(origin="x").root == "x"  # __post_init__ runs
    assert replace(Ref(origin="x"), origin="y").root == "x"  # as dataclasses.replace
    assert Const(value=1) != Value()
    r = Ref(origin="x", shape=(8, 128), decl=None)  # the checker's workers send these back
    assert pickle.loads(pickle.dumps(r)) == r
    assert sorted([Span(2, 0, 2, 1), Span(1, 5, 1, 6)])[0] == Span(1, 5, 1, 6)


def test_replace_still_serves_plain_dataclasses():
    @dataclasses.dataclass
    class Plain:
        a: int
        b: int = 0

    assert replace(Plain(1), b=2) == Plain(1, 2)
