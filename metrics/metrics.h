// The metrics layer: the numbers papers report, computed as their reference tools compute them
// (sacreBLEU's BLEU and chrF for translation, pycocotools' COCOeval AP for detection).
#pragma once

#include "metrics/coco.h"
#include "metrics/text.h"
