"""The training loop's garbage-collection regime (``IterationGarbageCollection``): automatic
collection off and the start-up objects frozen inside, both restored on the way out, an
exception's included; cycles that outlive an iteration still freed by the periodic full pass."""

import gc
import weakref

import pytest

import rspo_gym  # noqa: F401
from rspo_gym.algos import GRPOTrainer
from rspo_gym.training.trainer import IterationGarbageCollection


@pytest.fixture(autouse=True)
def _collector_as_found():
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    yield
    assert gc.isenabled() == enabled and gc.get_freeze_count() == frozen
    gc.enable()


class _Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_the_collector_is_restored_after_the_block_and_after_an_exception():
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with IterationGarbageCollection() as garbage:
        assert not gc.isenabled() and gc.get_freeze_count() > 0
        garbage.iteration_starts()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError, match="boom"):
        with IterationGarbageCollection():
            raise RuntimeError("boom")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_process_that_turned_the_collector_off_keeps_it_off_and_nothing_is_collected():
    gc.disable()
    try:
        with IterationGarbageCollection(full_every=1) as garbage:
            node = _Node()
            alive = weakref.ref(node)
            del node
            garbage.iteration_starts()
            assert alive() is not None  # the process asked for no collection
        assert not gc.isenabled()
    finally:
        gc.enable()
    gc.collect()


def test_a_cycle_that_outlives_its_iteration_is_freed_by_the_periodic_full_collection():
    with IterationGarbageCollection(full_every=3) as garbage:
        node = _Node()
        alive = weakref.ref(node)
        garbage.iteration_starts()  # 1: young collection; the reachable node moves to the old generation
        del node
        garbage.iteration_starts()  # 2: young collection only
        assert alive() is not None
        garbage.iteration_starts()  # 3: full collection
        assert alive() is None
    with pytest.raises(ValueError):
        IterationGarbageCollection(full_every=0)


def test_learn_restores_the_collector_when_a_callback_raises(tmp_path):
    trainer = GRPOTrainer("rspo/ALFWorld-v0", model="drrn", num_groups=1, group_size=2, max_turns=2, eval_every=0,
                          progress=False, output_dir=str(tmp_path))

    def stop(_trainer, _metrics):
        assert not gc.isenabled()  # inside the loop
        raise RuntimeError("stopped by the callback")

    try:
        with pytest.raises(RuntimeError, match="stopped by the callback"):
            trainer.learn(2, callback=stop)
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        trainer.close()
