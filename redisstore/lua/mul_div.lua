-- Exact integer arithmetic on doubles, which hold integers exactly up to
-- 2^53 (internal/algo keeps every quantity below 2^51). The first part of
-- the prelude, and the only helper the single-request scripts take: the
-- sliding window's needs the wide multiply-divide.
local EXACT = 9007199254740992 -- 2^53

local floor = math.floor

-- mul_div returns q and r with a*b = q*c + r, 0 <= r < c, for 0 <= a < 2^51,
-- 0 <= b < 2^53, c > 0. When the product is exact the division is too;
-- otherwise it runs a shift-and-subtract over the 51 bits of a, whose
-- partial sums all stay below 2^53.
local function mul_div(a, b, c)
  local p = a * b
  if p < EXACT then
    local q = floor(p / c)
    return q, p - q * c
  end
  local bq = floor(b / c)
  local br = b - bq * c
  local q, r = 0, 0
  for i = 50, 0, -1 do
    q, r = q * 2, r * 2
    if r >= c then q, r = q + 1, r - c end
    if floor(a / 2 ^ i) % 2 == 1 then
      q, r = q + bq, r + br
      if r >= c then q, r = q + 1, r - c end
    end
  end
  return q, r
end
