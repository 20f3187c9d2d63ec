// The metrics layer: the numbers papers report, computed as their reference tools compute them
// (sacreBLEU's BLEU and chrF for translation).
#pragma once

#include "metrics/text.h"
