// LsaComm's insides (lsa_comm.h): the host communicator and the
// device communicator kernels take by value. Private to the .cu files of
// kernels/cuda that launch LSA kernels.
#pragma once

#include <nccl.h>
#include <nccl_device.h>

#include "kernels/cuda/lsa_comm.h"

namespace coconet::kernels::cuda {

struct LsaComm::Impl {
  ncclComm_t comm = nullptr;
  ncclDevComm dev{};
};

}  // namespace coconet::kernels::cuda
