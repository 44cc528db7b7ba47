// data/data.h — everything in kiln::data.
#pragma once

#include "data/csv.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/device_prefetcher.h"
#include "data/idx.h"
#include "data/sampler.h"
#include "data/transforms.h"
