// nn/nn.h — everything in kiln::nn: modules, layers, losses, init, functional, checkpoints.
#pragma once

#include "nn/attention.h"
#include "nn/checkpoint.h"
#include "nn/containers.h"
#include "nn/conv.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/rnn.h"
#include "nn/serialize.h"
#include "nn/training_mode_guard.h"
#include "nn/transformer.h"
