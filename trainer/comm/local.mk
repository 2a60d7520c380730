# trainer/comm/local.mk: placeholder until the component lands.
