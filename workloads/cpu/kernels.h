// Everything of the CPU kernels in one include (for the executor and the tests).
#pragma once

#include "workloads/cpu/activations.h"
#include "workloads/cpu/attention.h"
#include "workloads/cpu/batchnorm.h"
#include "workloads/cpu/blocks.h"
#include "workloads/cpu/concat.h"
#include "workloads/cpu/conv2d.h"
#include "workloads/cpu/cross_entropy.h"
#include "workloads/cpu/embedding.h"
#include "workloads/cpu/layer.h"
#include "workloads/cpu/layernorm.h"
#include "workloads/cpu/linear.h"
#include "workloads/cpu/pool.h"
#include "workloads/cpu/rmsnorm.h"
#include "workloads/cpu/rope.h"
#include "workloads/cpu/swiglu.h"
#include "workloads/cpu/tensor.h"
