"""The sizes of rckpt_bench.py's runs: --quick, --full and --tiny."""

PROFILES = {
    # reps: runs of each timed tool; the rest sizes the data and the tools
    "quick": dict(reps=3, link_steps=8, ckpt_width=512, ckpt_steps=600, images=1000, chains="1,2,4,8,16",
                  rb_sizes=[65536, 4 << 20], rb_seconds=2, rb_budget=256 << 20, stall_width=1024, stall_saves=6,
                  loader_images=500, loader_epochs=2, loader_learners=4, loc_learners="4,16,64", gpu_sizes="10M",
                  group_steps=4,
                  lm=["--steps", "600", "--every", "100", "--d-model", "64", "--corpus-bytes", "1000000"],
                  fr_eps="0.0006,0.0012,0.003", fr_methods="rckpt,qd",
                  pcr_args=["--threads", "1", "--scales", "auto", "--no-transcode"], big_mi=0,
                  rs_sizes="1,50", rs_dtypes="fp32", rs_chains="1,16", link_resume="50"),
    "full": dict(reps=5, link_steps=16, ckpt_width=1024, ckpt_steps=1200, images=3000, chains="1,2,4,8,16,32",
                 rb_sizes=[65536, 1 << 20, 4 << 20], rb_seconds=5, rb_budget=1 << 30, stall_width=2048, stall_saves=15,
                 loader_images=2000, loader_epochs=3, loader_learners=4, loc_learners="4,16,64,256,1024",
                 gpu_sizes="10M,100M", group_steps=8,
                 lm=["--steps", "2000", "--every", "100"],
                 fr_eps="0.0003,0.0006,0.0012,0.002,0.003,0.005,0.01",
                 fr_methods="rckpt,abl-uniform-bins,abl-no-rearrange,abl-magnitude-only,qd,checknrun",
                 pcr_args=["--threads", "1,2", "--scales", "auto,2"], big_mi=48,
                 rs_sizes="1,50,200", rs_dtypes="fp32,bf16", rs_chains="1,16,100", link_resume="50"),
    # every suite and every step of it, on the least data that runs them:
    # the tests' (tests/cluster/test_bench.sh), not a benchmark
    "tiny": dict(reps=1, link_steps=2, ckpt_width=64, ckpt_steps=425, images=64, chains="1,2,4,16",
                 rb_sizes=[65536], rb_seconds=1, rb_budget=64 << 20, stall_width=256, stall_saves=3,
                 loader_images=64, loader_epochs=2, loader_learners=2, loc_learners="4,16", gpu_sizes="1M",
                 group_steps=2,
                 lm=["--steps", "200", "--every", "100", "--d-model", "32", "--corpus-bytes", "200000"],
                 fr_eps="0.0012", fr_methods="rckpt,qd",
                 pcr_args=["--threads", "1", "--scales", "auto", "--no-transcode"], big_mi=0,
                 rs_sizes="1", rs_dtypes="fp32", rs_chains="1,4", link_resume="1"),
}
