// amp/amp.h — automatic mixed precision: the autocast guard and the GradScaler.
// Read next: autograd/autocast.h.
#pragma once

#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
