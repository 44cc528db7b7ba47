// amp/amp.h — automatic mixed precision: the autocast guard and the GradScaler.
// Read next: amp/autocast.h.
#pragma once

#include "amp/autocast.h"
#include "amp/grad_scaler.h"
