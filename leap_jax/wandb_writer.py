"""An optional Weights & Biases writer: the run's scalars, as TensorBoard.

Off unless `config.wandb_project` is set; `wandb` is imported only then
(`pip install -e .[wandb]`; it is not in requirements.txt). The run id is
kept in `workdir/wandb_run_id`, so a resumed run logs into the same W&B
run. Known limit: W&B drops values logged at a step at or below one it
already has, so after a kill -9 the redone steps keep the values logged
before the kill (metrics.jsonl and TensorBoard hold the redone ones).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

RUN_ID_FILE = "wandb_run_id"


class WandbWriter:
  """RunLog sink: `write(step, scalars)`, `close()`."""

  def __init__(self, project: str, workdir: str, config: Mapping[str, Any],
               entity: str = "", module: Any = None):
    """module: the wandb module (tests pass a fake; default: import it)."""
    if module is None:
      try:
        module = importlib.import_module("wandb")
      except ImportError as e:
        raise ValueError("config.wandb_project is set but wandb is not "
                         "installed: pip install -e .[wandb]") from e
    id_path = os.path.join(workdir, RUN_ID_FILE)
    run_id = None
    if os.path.exists(id_path):
      with open(id_path) as f:
        run_id = f.read().strip() or None
    if run_id is None:
      run_id = module.util.generate_id()
      os.makedirs(workdir, exist_ok=True)
      with open(id_path, "w") as f:
        f.write(run_id + "\n")
    self._run = module.init(project=project, entity=entity or None,
                            name=os.path.basename(os.path.normpath(workdir)),
                            id=run_id, resume="allow", dir=workdir,
                            config=dict(config))

  def write(self, step: int, scalars: Mapping[str, float]) -> None:
    self._run.log(dict(scalars), step=step)

  def close(self) -> None:
    if self._run is not None:
      self._run.finish()
      self._run = None
