"""Familiars VRAM gate (§5.10): devices, model clients, the gate, traces and the simulator."""
