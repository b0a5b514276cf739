"""What an idle sandbox's agent (PID 1) holds in page tables: its mappings stay in one
region. The kernel puts a static PIE's program break far from the binary (at
ELF_ET_DYN_BASE), and musl's malloc took its first metadata page there: a page-table
branch of its own, 12 KiB of every idle sandbox (bench/density, PageTables). The agent
reserves the break with a PROT_NONE page (src/agent/agent.c, keep_heap_near), so malloc
maps beside the binary."""
import pytest

from .conftest import agent_pid_of

GIB = 1 << 30
# Placed by the kernel wherever it likes (near the stack on some versions).
KERNEL_PLACED = ("[stack]", "[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]")


def mappings(pid):
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            name = parts[5] if len(parts) > 5 else ""
            out.append((lo, hi, parts[1], name))
    return out


def test_an_idle_agent_maps_no_heap_and_one_region(api, sandbox):
    # a command first: the agent has made its shims and buffers, as an idle one has
    assert api.sh(sandbox, "echo hi").out == "hi\n"
    pid = agent_pid_of(sandbox)
    maps = mappings(pid)
    assert not [m for m in maps if m[3] == "[heap]"], \
        f"the agent grew the program break: {[m for m in maps if m[3] == '[heap]']}"
    if any("/ld-linux" in name for lo, hi, perms, name in maps):
        pytest.skip("this agent is dynamically linked (the sanitized build): its layout is "
                    "the loader's and ASan's; the release agent is a static PIE")
    regions = {lo // GIB for lo, hi, perms, name in maps
               if name not in KERNEL_PLACED and perms != "---p"}
    assert len(regions) == 1, \
        f"the agent's own mappings span {len(regions)} 1-GiB regions: " \
        f"{[(hex(lo), perms, name) for lo, hi, perms, name in maps]}"
    # the reserved page is still there, untouched (PROT_NONE)
    assert any(perms == "---p" and hi - lo == 4096 and lo // GIB not in regions
               for lo, hi, perms, name in maps), maps
