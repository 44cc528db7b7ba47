// optim/optim.h — everything in kiln::optim.
#pragma once

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
