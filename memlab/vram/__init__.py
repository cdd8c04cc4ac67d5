"""The VRAM gate (familiars §5.10): devices, priorities, the gate, its trace and a simulator."""

from memlab.vram.devices import Device, SimulatedDevice
from memlab.vram.gate import ModelBudgetExceeded, Request, Resident, VRAMGate
from memlab.vram.policy import KeepAlivePolicy, LRUPolicy, Policy, PriorityPolicy
from memlab.vram.priority import boost_thread_priority, current_priority
from memlab.vram.plots import vram_policies, vram_timeline
from memlab.vram.trace import Trace, TraceEvent, plot_timeline

__all__ = ["Device", "SimulatedDevice", "ModelBudgetExceeded", "Request", "Resident", "VRAMGate",
           "KeepAlivePolicy", "LRUPolicy", "Policy", "PriorityPolicy", "boost_thread_priority",
           "current_priority", "Trace", "TraceEvent", "plot_timeline", "vram_policies",
           "vram_timeline"]
