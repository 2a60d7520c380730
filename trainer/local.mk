# trainer/local.mk: placeholder until the trainer lands (engine, models, optimizer, torus-train).
