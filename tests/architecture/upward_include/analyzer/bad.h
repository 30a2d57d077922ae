// A lower layer reaching up: the layering check must refuse this tree.
#pragma once
#include "report/text_report.h"
