"""One learner of test_pcr_distributed_locality: reads a PCR dataset for
three epochs in the regular and the locality-aware mode over
torch.distributed (gloo, file rendezvous on loopback) and writes what it
saw (per epoch and step: ids and a hash of each JPEG) and its loader stats
as JSON.

    loader_worker.py DATASET RANK WORLD RENDEZVOUS-FILE OUT.json
"""
import json
import os
import sys
import zlib

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import rckpt  # noqa: E402


def main():
    ds_name, rank, world, rdv, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + rdv, rank=rank, world_size=world)
    ds = rckpt.PCRDataset(ds_name, decode=False, fidelity=2)
    res = {}
    for mode in ("regular", "locality"):
        ld = ds.distributed(local_batch=4, seed=7, locality=(mode == "locality"), threads=2)
        per = []
        for epoch in range(3):
            ld.set_epoch(epoch)
            before = ld.stats()
            steps = []
            for batch in ld:
                steps.append([[i, zlib.crc32(x)] for i, (x, _) in zip(ld.ids, batch)])
            after = ld.stats()
            per.append({"steps": steps,
                        "storage_bytes": after["storage_bytes"] - before["storage_bytes"],
                        "recv_samples": after["recv_samples"] - before["recv_samples"]})
        res[mode] = per
        ld.close()
    ds.close()
    with open(out, "w") as f:
        json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
