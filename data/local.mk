# data/local.mk: placeholder until the component lands.
