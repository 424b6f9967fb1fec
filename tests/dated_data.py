"""The session's data folder of the 2021 layout (``08/``, ``0809/``, ``0910/``, ``1011/``) as a
folder named with years that crosses one (``2021-11/``, ``2021-11_2021-12/``,
``2021-12_2022-01/``, ``2022-01_2022-02/``): links to the same files, so the tests of dated
periods read the same examples as those of the 2021 layout without building anything."""

from __future__ import annotations

from pathlib import Path

from tw_jax.time import Period, Snapshot

DATED = {"08": "2021-11", "0809": "2021-11_2021-12", "0910": "2021-12_2022-01",
         "1011": "2022-01_2022-02"}
# What each 2021 token becomes in task names: the periods', and every snapshot's (the periods'
# new snapshots too).
TOKENS = {**{p: Period.parse(d).token for p, d in DATED.items() if "_" in d},
          **{m: Snapshot.parse("2021-11").plus_months(i).token
             for i, m in enumerate(("08", "09", "10", "11"))}}


def dated_copy(data_dir: Path, to: Path) -> Path:
    """``data_dir`` with its period and snapshot folders renamed (links to the originals)."""
    to.mkdir(parents=True)
    for child in data_dir.iterdir():
        target = to / DATED.get(child.name, child.name)
        target.symlink_to(child, target_is_directory=child.is_dir())
    return to


def renamed(name: str) -> str:
    """A task name of the 2021 folder as the dated folder names it."""
    for legacy in sorted(TOKENS, key=len, reverse=True):
        if f"_{legacy}_" in name or name.endswith(f"_{legacy}"):
            return name.replace(f"_{legacy}", f"_{TOKENS[legacy]}", 1)
    return name
