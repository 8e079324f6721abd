"""Small hand-written scenes shared by the ALFWorld tests."""

from rspo_gym.envs.alfworld.scenes import SceneBuilder
from rspo_gym.envs.alfworld.world import Task, World


def shared_cabinets() -> World:
    """Two cabinets at one location (an ALFWorld quirk), a countertop elsewhere; a cup in cabinet 1 and an apple on the countertop."""
    scene = SceneBuilder()
    first = scene.add_receptacle("cabinet", location=0, openable=True)
    scene.add_receptacle("cabinet", location=0, openable=False)
    counter = scene.add_receptacle("countertop", location=1)
    scene.add_item("cup", first)
    scene.add_item("apple", counter)
    scene.add_item("mug", counter, state=("cool",))
    task = Task("pick_and_place_simple", "cup", "countertop", None, "put a cup in countertop.")
    return scene.build(task, agent_location=2, name="shared_cabinets")


def two_receptacle_watch() -> World:
    """A watch listed in a drawer and on a sidetable at once (as ~2.5 % of real objects are)."""
    scene = SceneBuilder()
    drawer = scene.add_receptacle("drawer", openable=False)
    table = scene.add_receptacle("sidetable")
    scene.add_receptacle("safe", openable=True)
    scene.add_item("watch", drawer, table)
    task = Task("pick_and_place_simple", "watch", "safe", None, "put some watch on safe.")
    return scene.build(task, name="two_receptacle_watch")


def bedroom_look() -> World:
    """A desklamp on a desk, a book on the bed: look at book under the desklamp."""
    scene = SceneBuilder()
    bed = scene.add_receptacle("bed")
    desk = scene.add_receptacle("desk")
    scene.add_item("book", bed)
    scene.add_item("desklamp", desk)
    task = Task("look_at_obj_in_light", "book", None, "desklamp", "look at book under the desklamp.")
    return scene.build(task, name="bedroom_look")
