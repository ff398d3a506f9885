"""Keys of `hydra/launcher=torchrun` (harness.launch.torchrun.TorchrunLauncherConf), registered in
Hydra's ConfigStore."""
from hydra.core.config_store import ConfigStore

from harness.launch.torchrun import TorchrunLauncherConf

ConfigStore.instance().store(group="hydra/launcher", name="torchrun", node=TorchrunLauncherConf, provider="harness")
