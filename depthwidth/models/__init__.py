"""Models: the Flax NNX decoder LM, sharding, the training engine, training runs, GPT-2 interop.

    model     the LM (GPT-2 arrangement, logical axes on every parameter, scan over layers)
    sharding  the mesh and the one logical-axis rule table
    engine    state layout, AOT-compiled sharded train/eval steps, evaluate
    train     train_run (config -> record) as named steps; load_run (kept run -> model)
    gpt2      Hugging Face GPT-2 weights in and out
    perf      measured peak FLOP/s and MFU;  bench: `depthwidth bench train`
"""
