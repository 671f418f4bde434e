#!/usr/bin/env python3
"""Writes the described machines the topology tests load (tests/engine/topologies/*.xml).

Each is written by lstopo (Debian's hwloc-nox) from a synthetic description, then given what
the real machine's firmware and kernel report and the synthetic syntax cannot say:
  - Linux's numbering: PU os index = core + cores * thread (the SMT siblings of a core are a
    whole chip's cores apart), DRAM nodes first, then the high-bandwidth nodes (KNL SNC-4 flat:
    DDR 0-3, MCDRAM 4-7);
  - the `subtype` of a high-bandwidth node: "MCDRAM" (KNL), "HBM" (Xeon Max);
  - or, for a machine whose firmware reports bandwidths (ACPI HMAT) but no subtype, hwloc's
    Bandwidth memory attribute of each node from its own cpus (subtype "bandwidth" below).
Cpusets and nodesets are recomputed from the renumbered PUs and nodes.
Run it from anywhere: python3 tests/engine/topologies/make_fixtures.py (needs lstopo-no-graphics).
"""
import os
import subprocess
import xml.etree.ElementTree as ET

GIB = 1 << 30

# name: (synthetic description, the subtype of its high-bandwidth nodes or None, what it is)
# In a description, each locality lists its DRAM node first and its high-bandwidth node second.
MACHINES = {
    "knl-quadrant-flat": ("pack:1 [numa(memory=%d)] [numa(memory=%d)] core:68 pu:4"
                          % (96 * GIB, 16 * GIB), "MCDRAM",
                          "KNL 7250, quadrant, flat: 96 GiB DDR4 node 0, 16 GiB MCDRAM node 1"),
    "knl-snc2-flat": ("pack:1 group:2 [numa(memory=%d)] [numa(memory=%d)] core:34 pu:4"
                      % (48 * GIB, 8 * GIB), "MCDRAM",
                      "KNL 7250, SNC-2, flat: DDR nodes 0-1, 8 GiB MCDRAM nodes 2-3"),
    "knl-snc4-flat": ("pack:1 group:4 [numa(memory=%d)] [numa(memory=%d)] core:17 pu:4"
                      % (24 * GIB, 4 * GIB), "MCDRAM",
                      "KNL 7250, SNC-4, flat: DDR nodes 0-3, 4 GiB MCDRAM nodes 4-7"),
    "knl-snc4-hybrid": ("pack:1 group:4 [numa(memory=%d)] [numa(memory=%d)] core:17 pu:4"
                        % (24 * GIB, 2 * GIB), "MCDRAM",
                        "KNL 7250, SNC-4, hybrid 50%: half the MCDRAM a cache, 2 GiB nodes 4-7"),
    "knl-quadrant-cache": ("pack:1 [numa(memory=%d)] core:68 pu:4" % (96 * GIB), None,
                           "KNL 7250, quadrant, cache: all MCDRAM a memory-side cache, one node"),
    "knl-snc4-cache": ("pack:1 group:4 [numa(memory=%d)] core:17 pu:4" % (24 * GIB), None,
                       "KNL 7250, SNC-4, cache: four DDR nodes, no MCDRAM node"),
    "xeon-max-snc4-flat": ("pack:2 group:4 [numa(memory=%d)] [numa(memory=%d)] core:14 pu:2"
                           % (64 * GIB, 16 * GIB), "HBM",
                           "2 x Xeon Max 9480, SNC-4, flat: DDR nodes 0-7, 16 GiB HBM nodes 8-15"),
    "hbm-bandwidth-only": ("pack:1 group:2 [numa(memory=%d)] [numa(memory=%d)] core:8 pu:2"
                           % (32 * GIB, 16 * GIB), "bandwidth",
                           "2 clusters of 8 cores, DDR nodes 0-1 and HBM nodes 2-3 known only "
                           "by their HMAT bandwidth (30 vs 200 GB/s)"),
    "two-socket": ("pack:2 [numa(memory=%d)] l3:1(size=22MiB) core:16 pu:2" % (192 * GIB), None,
                   "2 x 16-core Xeon, 2 threads a core, one DDR node and a 22 MiB L3 a socket"),
    "one-core": ("pack:1 [numa(memory=%d)] core:1 pu:1" % (8 * GIB), None,
                 "one core, one thread, 8 GiB"),
}


def bitmap(bits):
    """hwloc's bitmap text: 32-bit hex words, most significant first."""
    value = 0
    for b in bits:
        value |= 1 << b
    words = []
    while True:
        words.append("0x%08x" % (value & 0xFFFFFFFF))
        value >>= 32
        if value == 0:
            break
    return ",".join(reversed(words))


def renumber(root, hbw_subtype):
    objs = list(root.iter("object"))
    pus = [o for o in objs if o.get("type") == "PU"]
    cores = [o for o in objs if o.get("type") == "Core"]
    threads = len(pus) // len(cores)
    for ci, core in enumerate(cores):
        for t, pu in enumerate(core.findall("object")):
            pu.set("os_index", str(ci + len(cores) * t))
    nodes = [o for o in objs if o.get("type") == "NUMANode"]
    # Each locality's first node is its DRAM, the second (if any) its high-bandwidth node.
    parents = {}
    for o in objs:
        for c in o.findall("object"):
            parents[c] = o
    dram, hbw = [], []
    for n in nodes:
        siblings = [c for c in parents[n].findall("object") if c.get("type") == "NUMANode"]
        (dram if siblings.index(n) == 0 else hbw).append(n)
    for i, n in enumerate(dram + hbw):
        n.set("os_index", str(i))
        if n in hbw and hbw_subtype and hbw_subtype != "bandwidth":
            n.set("subtype", hbw_subtype)

    def fill(o):
        kids = o.findall("object")
        cpus, mems = set(), set()
        if o.get("type") == "PU":
            cpus.add(int(o.get("os_index")))
        if o.get("type") == "NUMANode":
            mems.add(int(o.get("os_index")))
        for k in kids:
            c, m = fill(k)
            cpus |= c
            mems |= m
        o.set("_cpus", " ".join(map(str, sorted(cpus))))
        o.set("_mems", " ".join(map(str, sorted(mems))))
        return cpus, mems

    top = root.find("object")
    fill(top)
    for o in objs:
        cpus = [int(x) for x in o.get("_cpus").split()]
        if o.get("type") == "NUMANode":  # memory takes its parent's cpus
            cpus = [int(x) for x in parents[o].get("_cpus").split()]
        mems = [int(x) for x in o.get("_mems").split()]
        for attr, bits in (("cpuset", cpus), ("complete_cpuset", cpus), ("nodeset", mems),
                           ("complete_nodeset", mems)):
            if o.get(attr) is not None:
                o.set(attr, bitmap(bits))
    for o in objs:
        del o.attrib["_cpus"]
        del o.attrib["_mems"]
    if hbw_subtype == "bandwidth":  # MB/s from each node's own cpus, as hwloc reads HMAT
        attr = ET.SubElement(root, "memattr", {"name": "Bandwidth", "flags": "5"})
        for n in dram + hbw:
            ET.SubElement(attr, "memattr_value", {
                "target_obj_type": "NUMANode", "target_obj_gp_index": n.get("gp_index"),
                "value": "200000" if n in hbw else "30000", "initiator_cpuset": n.get("cpuset")})
    for o in objs:  # the Machine's allowed sets follow the renumbered complete sets
        if o.get("allowed_cpuset") is not None:
            o.set("allowed_cpuset", o.get("complete_cpuset"))
            o.set("allowed_nodeset", o.get("complete_nodeset"))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, (desc, subtype, what) in MACHINES.items():
        xml = subprocess.run(["lstopo-no-graphics", "--input", desc, "--of", "xml", "-"],
                             check=True, capture_output=True, text=True).stdout
        root = ET.fromstring(xml.split("\n", 2)[2] if xml.startswith("<?xml") else xml)
        renumber(root, subtype)
        body = ET.tostring(root, encoding="unicode")
        path = os.path.join(here, name + ".xml")
        with open(path, "w") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n')
            f.write("<!-- %s: %s (tests/engine/topologies/make_fixtures.py) -->\n" % (name, what))
            f.write(body + "\n")
        print(path)


if __name__ == "__main__":
    main()
