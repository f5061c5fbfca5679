/*
nope (Kazemnejad et al. 2023): no position information at all. The causal mask alone
tells a token from the ones before it, which is enough for a decoder to infer positions.
Every hook is the default: nothing to define.
*/
