// Emulator stand-in for the CUDA header of the same name.
#pragma once
#include "emu.h"
