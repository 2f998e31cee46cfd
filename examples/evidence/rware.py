"""Evidence on RWARE per the protocol (docs/evidence/README.md#the-protocol): on tiny-4ag-hard and
small-4ag, the flat robots on the env reward, the flat robots with the scenario's goal-free shaping
(`w_int.low=0.05`, the dispatcher's robots' weight) and its compass (`compass=true`: each robot
observes the vector to the target the shaping rewards progress to, as the dispatcher's robots
observe their goal's), and the dispatcher over the robots, both layers trained together from scratch
on the whole budget (`--layer all`: the dispatcher on the env reward alone, its robots on the env
reward plus 0.05 x progress toward their goal). 5 seeds each.

    python examples/evidence/rware.py --write docs/evidence        # docs/evidence/rware-SIZE.md and .png

The issue's target: the hierarchy delivers at least 2x the better flat arm at 2M env frames, the
intervals apart. `--size` picks one of the two; `--out DIR` holds the runs in DIR/rware-SIZE
(default runs/evidence), finished runs are reused; `--steps`, `--seeds`,
`--episodes`, `--set KEY=VALUE`, `--tag`, `--report-only` as in examples.studies.protocol. The
layers' intervals and the robots' weights are the scenario's defaults, not tuned.
The report's Notes hold the earlier designs (NOTES) and what they measured.
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# run as a script, this file's folder leads sys.path, and `import rware` (the scenario's) would find this file
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parents[1]))   # the repository root, for examples.studies
from examples.studies import protocol  # noqa: E402 (after the path is set)
from examples.studies.protocol import ProtocolPlan  # noqa: E402

SCRIPT = "examples/evidence/rware.py"
NOTES = [
    "Earlier designs, measured on tiny-4ag-hard (2M frames, 5 seeds; runs kept beside these as "
    "`skillstart_*`): the hierarchy's robots trained first as a skill library (`--skills`, 500k of the 2M "
    "frames under the scenario's scripted greedy dispatcher, the robots on progress alone: "
    "`w_ext.low=0 w_int.low=1`), then `--layer all --load low=SKILLRUN` for the rest, delivered 11.69 "
    "[-8.26, 31.63] (10.28, 39.82, 2.89, 2.69, 2.75). Every skill run plateaued at ~2.5 deliveries, on a "
    "reward that pays a delivery like one cell of progress, and 3 of 5 seeds never took off after it. The "
    "allocation was not what held it back: seed 0's and seed 2's final robots under the scripted dispatcher "
    "delivered 9.3 and 1.7 (30 episodes), about what they delivered under their trained dispatcher. Robots "
    "frozen after the skill run (`then=\"high\"`) delivered 1.74 (seed 0).",
    "Seed 2 of the hierarchy trained its first 1,161,216 frames as a diagnostic run (this command, another "
    "folder, beside three other runs), then went on to 2M with `hdppo train --resume`; its minutes are both "
    "parts' sum.",
    "A diagnostic, not a protocol arm: the hierarchy with `free_goals=true` (the dispatcher may assign only "
    "requests no robot carries), seeds 0 and 1, ended its training curve (deliveries over the last 200 "
    "episodes) at 41.5 and 3.0, against 39.4 and 3.1 without the mask: the seed stuck near 3 deliveries "
    "stays stuck, so robots sent after shelves another robot carries are not what holds it there.",
    "A diagnostic, not a protocol arm: the hierarchy with `hold=true` (a robot keeps the request it was "
    "given until that shelf is lifted), 5 seeds, ended its training curve at 37.2, 9.2, 17.3, 29.9 and 4.7 "
    "(19.66 [2.64, 36.68]), against 39.4, 3.1, 42.6, 42.4 and 2.8 without it: -6.40 [-22.07, 9.27] paired. "
    "It lifted one stuck seed a little (1: 9.2 against 3.1) and took off later on the others (seed 2 at "
    "1M frames: 3.2 against 34.4), so switching goals every 10 steps is not what keeps robots near 3 "
    "deliveries.",
    "What the stuck seeds' robots do (the table's `lifts`: requested shelves lifted per episode, again "
    "after a set-down too, in the same final eval): they reach their shelves and set them down again. "
    "Seeds 1 and 4 of the hierarchy lifted 140.7 and 129.8 an episode for 2.9 and 2.5 deliveries; its other "
    "seeds 41.8, 43.4 and 42.4 for 40.2, 43.2 and 42.0, and the shaped flat robots about one lift a "
    "delivery (45.0-47.3). Until commit 00ce87f each lift counted as a goal success, and the stuck seeds' "
    "goal success (0.30, 0.27) looked like the others'; it counts the first lift since the request now "
    "(0.035, 0.031 in the table above).",
    "A diagnostic, not yet a protocol arm: the hierarchy with `carry_potential=true` (the robots' reward pays "
    "every lift of a requested shelf +1 and takes it back, -1, when the shelf is set down undelivered; with "
    "first-pick credit the lift-and-set-down loop cost nothing), 5 seeds, 100 eval episodes each: 41.9, 37.6, "
    "5.2, 43.3 and 27.3 deliveries an episode (31.1 [11.5, 50.6]) against 40.2, 2.9, 43.2, 42.0 and 2.5 "
    "without it (26.2). It frees the two stuck seeds (1 and 4: 39.9 and 35.8 lifts, goal success 0.323 and "
    "0.248, against 140.7 and 129.8 lifts, 0.035 and 0.031 without it; their training curves left ~3 at "
    "about 0.9M and 1.6M frames), but seed 2, good without it, sticks with it (its training curve stays at "
    "2.5-3.1 deliveries from 200k to 2M frames): it moves the failure mode rather than removing it. The "
    "shaped flat arm with the same option is not run yet, so it stays off by default. Command: "
    "`hdppo train rware size=tiny-4ag hard=true layers=2 carry_potential=true --layer all "
    "--steps 2000000 --seed S workers=2`, then `hdppo eval RUN --episodes 100 --seed 12345+S`.",
    "What 500 steps allow (`python examples/studies/rware_scripted.py --env rware-tiny-4ag-hard-v2 --episodes "
    "20 --seed 0`, docs/scenarios/rware.md): a hand-planned team (shortest paths over cell and facing, "
    "cooperative A* against collisions) delivers 54.3 [53.2, 55.3] an episode, so the shaped flat arm's 46.2 "
    "is 85% of it. The request queue's ceiling with no congestion is 88.4: 2 open requests, each needing a "
    "lift and a carry of 10.3 steps on average to a delivery cell, loaded robots on the highways. The issue's "
    "target of 2x the better flat arm (92.3) is above that ceiling. Only a looser ceiling leaves room for it "
    "(113.6: carried shelves requested again, carries through any cell).",
    "The shaped flat arm without its compass (`layers=1 w_int.low=0.05`) delivered 0.00 on seeds 0 and 1: "
    "the robots were rewarded for progress toward shelves outside their 3 x 3 view.",
]
SIZES = {"tiny-4ag-hard": ["size=tiny-4ag", "hard=true"], "small-4ag": ["size=small-4ag"]}


def plan(size: str, out: Path = Path("runs/evidence")) -> ProtocolPlan:
    """The protocol's plan of one size, its runs in OUT/rware-SIZE."""
    keys = SIZES[size]
    return ProtocolPlan(
        scenario="rware", outcome="deliveries", steps=2_000_000,
        flat=[*keys, "layers=1"], flat_shaped=[*keys, "layers=1", "w_int.low=0.05", "compass=true"],
        hier=[*keys, "layers=2"],
        seeds=[0, 1, 2, 3, 4], common=["workers=2"],
        eval_episodes=100, out=out / f"rware-{size}", name=f"rware-{size}", notes=NOTES,
        also=["lifts"])


def main(argv: list[str] | None = None) -> dict[str, dict]:
    return protocol.main_each(plan, list(SIZES), "size", SCRIPT, "RWARE per the evidence protocol", argv)


if __name__ == "__main__":
    main()
