"""Writes data/quality_sample.jsonl: the labelled sample the Korean quality filter is tuned and tested on.

    python bench/make_quality_sample.py            # rewrites data/quality_sample.jsonl (deterministic)

Every text here was written for this project (license-clean). Clean documents are hand-written
paragraphs by genre, shipped alone and as longer same-genre documents of several paragraphs, plus
English prose and source code that the filter must keep. Junk documents are built by small seeded
generators, one per kind of junk seen on the Korean web. One JSON object per line:
{"label": "clean"|"junk", "kind": "<genre or junk kind>", "text": "..."}.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUTPUT = Path(__file__).resolve().parent.parent / "data" / "quality_sample.jsonl"

NEWS = [
    "기상청은 15일 오전 브리핑에서 이번 주말까지 전국에 강한 비가 이어질 것으로 내다봤다. 특히 남부 지방에는 "
    "시간당 30밀리미터 안팎의 많은 비가 내리는 곳이 있겠다고 밝혔다. 기상청 관계자는 \"하천 주변 산책로와 지하 "
    "차도는 물이 빠르게 불어날 수 있으니 출입을 삼가 달라\"고 당부했다.",
    "정부가 내년도 예산안을 656조 원 규모로 편성했다. 기획재정부는 29일 국무회의를 거쳐 확정한 예산안을 "
    "국회에 제출한다고 밝혔다. 올해 본예산보다 2.8% 늘어난 규모로, 저출생 대응과 연구개발 분야 지출이 크게 "
    "늘었다. 반면 일부 사회간접자본 예산은 줄어 지역 사회의 반발이 예상된다.",
    "서울시는 다음 달부터 시내버스 첫차 운행 시간을 평균 15분 앞당긴다고 밝혔다. 새벽에 출근하는 청소 노동자와 "
    "경비원 등의 이동 편의를 높이기 위한 조치다. 시는 이용객이 많은 노선부터 순차적으로 적용하고, 효과를 분석해 "
    "대상 노선을 넓혀 갈 계획이다.",
    "국내 연구진이 상온에서도 성능이 떨어지지 않는 새로운 배터리 소재를 개발했다. 한국과학기술원 연구팀은 기존 "
    "소재보다 수명이 두 배 이상 긴 전극을 만드는 데 성공했다고 밝혔다. 연구 결과는 국제 학술지에 실렸으며, "
    "연구팀은 3년 안에 상용화를 목표로 기업과 공동 연구를 이어 가기로 했다.",
    "지난달 소비자물가가 1년 전보다 2.4% 올랐다. 통계청이 발표한 자료에 따르면 채소와 과일 가격이 크게 오른 "
    "반면 석유류 가격은 내림세를 보였다. 전문가들은 여름철 폭우의 영향으로 농산물 가격 불안이 당분간 이어질 "
    "수 있다고 분석했다.",
    "프로야구 정규 시즌이 막바지에 접어들면서 순위 경쟁이 치열해지고 있다. 선두 팀과 2위 팀의 승차는 불과 "
    "한 경기다. 두 팀은 이번 주말 맞대결을 앞두고 있어 사실상 정규 시즌 우승의 향방이 결정될 것으로 보인다. "
    "구단 측은 입장권이 예매 시작 10분 만에 모두 팔렸다고 전했다.",
    "교육부는 내년부터 초등학교 늘봄학교를 전국으로 확대한다고 밝혔다. 방과 후에도 아이를 학교에서 돌볼 수 있게 "
    "해 맞벌이 가정의 부담을 덜겠다는 취지다. 다만 현장 교사들은 업무가 늘어날 것을 우려하며 전담 인력을 "
    "충분히 배치해야 한다고 목소리를 높였다.",
    "부산 해운대 해수욕장이 다음 달 1일 개장한다. 해운대구는 올해 안전요원을 지난해보다 20명 늘리고, 야간 "
    "물놀이 구역을 따로 운영한다고 밝혔다. 구 관계자는 \"개장 기간 동안 음주 후 입수를 집중적으로 단속할 "
    "예정\"이라고 말했다.",
    "한국은행이 기준금리를 연 3.5%로 동결했다. 금융통화위원회는 물가 상승세가 둔화하고 있지만 가계부채 증가세가 "
    "여전히 높다는 점을 고려했다고 설명했다. 시장에서는 연내 한 차례 금리 인하가 이뤄질 가능성에 무게를 두고 있다.",
    "경찰이 노인을 상대로 한 전화 금융사기 조직을 붙잡았다. 이들은 검찰 수사관을 사칭해 피해자들에게 돈을 "
    "보내게 한 혐의를 받고 있다. 경찰은 \"수사기관은 전화로 돈을 요구하지 않는다\"며 의심스러운 전화를 받으면 "
    "바로 끊고 112에 신고해 달라고 당부했다.",
    "제주도를 찾은 외국인 관광객이 지난해보다 크게 늘었다. 제주관광협회에 따르면 올해 상반기 외국인 방문객은 "
    "80만 명을 넘어섰다. 항공 노선이 다시 열리고 크루즈 입항이 늘어난 영향이다. 도는 관광객 증가에 맞춰 "
    "교통과 숙박 안내 서비스를 보강하기로 했다.",
    "올해 김장 비용이 지난해보다 10%가량 오를 것으로 전망됐다. 배추와 무 작황이 좋지 않았던 데다 고춧가루 "
    "가격도 올랐기 때문이다. 한 유통업체는 4인 가족 기준 김장 비용을 약 40만 원으로 추산했다. 업계는 김장 "
    "시기를 조금 늦추면 비용을 줄일 수 있다고 조언했다.",
]

ENCYCLOPEDIA = [
    "한글은 1443년 조선의 세종이 창제하고 1446년 훈민정음이라는 이름으로 반포한 문자이다. 자음 14자와 모음 "
    "10자를 기본으로 하며, 이를 모아 음절 단위로 적는다. 발음 기관의 모양을 본떠 자음을 만들고, 하늘과 땅과 "
    "사람을 본떠 모음을 만들었다는 점에서 과학적인 문자로 평가받는다.",
    "경주는 경상북도 남동부에 있는 도시로, 약 천 년 동안 신라의 수도였다. 불국사와 석굴암, 첨성대, 대릉원 등 "
    "많은 문화유산이 남아 있어 '지붕 없는 박물관'이라고 불린다. 2000년에는 경주역사유적지구가 유네스코 "
    "세계유산으로 등재되었다.",
    "광합성은 식물이 빛에너지를 이용하여 이산화탄소와 물로부터 포도당을 만드는 과정이다. 이 과정은 주로 잎의 "
    "엽록체에서 일어나며, 부산물로 산소가 발생한다. 광합성은 지구 생태계의 에너지 흐름을 이루는 출발점이라는 "
    "점에서 매우 중요하다.",
    "김치는 배추나 무 같은 채소를 소금에 절인 뒤 고춧가루, 마늘, 젓갈 등의 양념을 버무려 발효시킨 한국의 "
    "전통 음식이다. 지역과 계절에 따라 수백 가지 종류가 있다. 2013년에는 김장 문화가 유네스코 인류무형문화유산으로 "
    "등재되었다.",
    "백두산은 한반도에서 가장 높은 산으로, 높이는 약 2,744미터이다. 산꼭대기에는 화산 활동으로 만들어진 "
    "칼데라호인 천지가 있다. 예로부터 민족의 영산으로 여겨졌으며, 여러 신화와 전설의 무대가 되었다.",
    "조선은 1392년 이성계가 세운 나라로, 1897년 대한제국으로 국호를 바꿀 때까지 약 500년간 이어졌다. "
    "유교를 통치 이념으로 삼았으며, 과거 제도를 통해 관리를 뽑았다. 수도는 한양으로, 오늘날의 서울이다.",
    "태양계는 태양과 그 주위를 도는 천체들로 이루어져 있다. 수성, 금성, 지구, 화성은 암석으로 된 지구형 "
    "행성이고, 목성과 토성은 기체로 된 거대한 행성이다. 천왕성과 해왕성은 얼음 성분이 많아 거대 얼음 행성으로 "
    "분류하기도 한다.",
    "판소리는 한 명의 소리꾼이 고수의 북장단에 맞추어 노래와 말, 몸짓을 섞어 긴 이야기를 풀어 가는 한국의 "
    "전통 공연 예술이다. 현재 전하는 작품으로는 춘향가, 심청가, 흥보가, 수궁가, 적벽가가 있다. 2003년 "
    "유네스코 인류무형문화유산 걸작으로 선정되었다.",
    "독도는 울릉도에서 동남쪽으로 약 87킬로미터 떨어진 곳에 있는 섬이다. 동도와 서도 두 개의 큰 섬과 "
    "89개의 작은 바위섬으로 이루어져 있다. 바다제비와 괭이갈매기 같은 바닷새의 번식지이며, 천연기념물로 "
    "지정되어 보호받고 있다.",
    "온돌은 아궁이에 불을 때어 방바닥 아래의 구들장을 데우는 한국의 전통 난방 방식이다. 데워진 돌이 열을 "
    "오래 간직하기 때문에 적은 연료로도 방을 따뜻하게 유지할 수 있다. 오늘날의 바닥 난방도 이 원리를 이어받았다.",
    "세종대왕은 조선의 제4대 왕으로, 1418년부터 1450년까지 나라를 다스렸다. 훈민정음을 창제했을 뿐 아니라 "
    "측우기와 해시계 같은 과학 기구의 제작을 지원하였다. 집현전을 중심으로 많은 학자를 길러 학문과 문화가 "
    "크게 발전하였다.",
    "반도체는 전기가 잘 통하는 도체와 통하지 않는 부도체의 중간 성질을 가진 물질이다. 규소가 대표적인 반도체 "
    "재료이며, 불순물을 조금 넣어 전기적 성질을 조절할 수 있다. 컴퓨터와 휴대전화를 비롯한 거의 모든 전자 "
    "기기의 핵심 부품으로 쓰인다.",
]

DAILY = [
    "오늘은 오랜만에 휴가를 내고 혼자 북한산에 다녀왔다. 평일이라 그런지 등산로가 한산해서 좋았다. 정상까지는 "
    "두 시간 반쯤 걸렸는데, 마지막 바위 구간에서는 숨이 턱까지 차올랐다. 그래도 꼭대기에서 내려다본 서울 "
    "풍경이 너무 멋져서 힘든 게 다 잊혔다. 내려오는 길에 먹은 파전과 막걸리는 말할 것도 없다.",
    "요즘 아침마다 30분씩 걷기를 시작했다. 처음에는 알람을 끄고 다시 잠들기 일쑤였는데, 일주일쯤 지나니 몸이 "
    "먼저 일어나는 느낌이다. 동네 하천을 따라 걷다 보면 계절이 바뀌는 게 눈에 보인다. 오늘은 길가에 코스모스가 "
    "피기 시작했다. 작은 습관 하나가 하루를 이렇게 바꿀 줄은 몰랐다.",
    "주말에 조카들이 놀러 와서 집이 하루 종일 시끌벅적했다. 같이 블록을 쌓고, 종이접기를 하고, 저녁에는 "
    "피자를 시켜 먹었다. 여섯 살 조카가 자기가 만든 종이비행기를 선물이라며 건네주는데 어찌나 귀엽던지. "
    "애들이 가고 나니 집이 너무 조용해서 조금 허전했다.",
    "이사 온 지 한 달이 지났다. 아직 정리하지 못한 상자가 베란다에 몇 개 남아 있지만, 이제야 조금 내 집 같은 "
    "느낌이 든다. 어제는 창가에 작은 화분을 두 개 들여놓았다. 햇빛이 잘 드는 집이라 식물들이 잘 자랐으면 좋겠다.",
    "퇴근길에 비가 갑자기 쏟아져서 편의점에서 우산을 하나 샀다. 집에 우산이 벌써 다섯 개나 있는데 또 샀다는 "
    "생각에 웃음이 났다. 그래도 덕분에 옷은 젖지 않았으니 괜찮다. 내일부터는 가방에 작은 우산을 꼭 넣고 "
    "다녀야겠다.",
    "이번 달부터 가계부를 쓰기 시작했다. 막상 적어 보니 커피와 배달 음식에 생각보다 훨씬 많은 돈을 쓰고 있었다. "
    "한 달에 커피값만 십만 원이 넘는다니 믿기지 않는다. 다음 달에는 일주일에 두 번은 집에서 커피를 내려 마셔 "
    "보기로 했다.",
    "어머니 생신이라 온 가족이 오랜만에 모였다. 동생이 케이크를 사 오고, 나는 미역국과 잡채를 준비했다. 요리 "
    "솜씨가 좋지는 않지만 어머니께서 맛있다고 두 그릇이나 드셔서 뿌듯했다. 다음 생신에는 가족 여행을 가자고 "
    "다들 약속했다.",
    "강아지를 키운 지 벌써 3년이 됐다. 처음 데려왔을 때는 손바닥만 했는데 이제는 제법 의젓해졌다. 아침저녁으로 "
    "산책을 시키는 게 귀찮을 때도 있지만, 현관문을 열면 꼬리를 흔들며 달려오는 모습을 보면 피곤이 싹 풀린다.",
    "오늘 처음으로 자전거를 타고 출근해 봤다. 회사까지 8킬로미터 정도인데 생각보다 자전거 도로가 잘 되어 있었다. "
    "땀이 좀 나긴 했지만 지하철에서 사람들 사이에 끼어 가는 것보다 훨씬 상쾌했다. 날씨가 좋은 날에는 자주 "
    "타고 다녀야겠다.",
    "도서관에서 빌린 책을 반납하러 갔다가 또 세 권을 빌려 왔다. 이번에는 소설 한 권과 여행 에세이 두 권이다. "
    "요즘은 잠들기 전에 휴대전화 대신 책을 읽으려고 노력하는데, 확실히 잠이 더 잘 온다.",
    "베란다 텃밭에 심은 방울토마토가 드디어 빨갛게 익었다. 씨앗부터 키운 거라 그런지 하나하나가 너무 소중하다. "
    "오늘 아침에 다섯 알을 따서 가족들과 나눠 먹었는데, 마트에서 사 먹는 것보다 훨씬 달았다.",
    "친구와 오랜만에 전화로 한 시간 넘게 수다를 떨었다. 대학교 때 이야기를 하다 보니 시간 가는 줄도 몰랐다. "
    "서로 바빠서 자주 만나지는 못하지만, 이렇게 연락하면 어제 만난 것처럼 편하다. 다음 달에는 꼭 얼굴 보기로 했다.",
]

RECIPES = [
    "김치찌개 만드는 법\n재료: 잘 익은 김치 300g, 돼지고기 앞다리살 200g, 두부 반 모, 대파 1대, 고춧가루 1큰술, "
    "다진 마늘 1큰술, 물 500ml\n1. 냄비에 돼지고기를 넣고 중불에서 기름이 나올 때까지 볶는다.\n2. 김치를 넣고 "
    "5분 정도 함께 볶는다.\n3. 물을 붓고 고춧가루와 다진 마늘을 넣어 20분간 끓인다.\n4. 두부와 대파를 넣고 "
    "5분 더 끓이면 완성이다.",
    "계란말이는 간단하지만 모양을 예쁘게 내기가 쉽지 않다. 계란 4개를 잘 풀어 소금으로 간을 하고, 잘게 썬 당근과 "
    "쪽파를 넣는다. 팬을 약불로 달군 뒤 기름을 얇게 두르고 계란물을 3분의 1만 붓는다. 반쯤 익으면 끝에서부터 "
    "돌돌 말고, 남은 계란물을 나누어 부어 가며 같은 방법으로 말아 주면 된다.",
    "된장찌개를 맛있게 끓이는 비결은 육수에 있다. 멸치와 다시마를 찬물에 30분 정도 담가 두었다가 10분간 끓여 "
    "육수를 낸다. 여기에 된장을 풀고 감자, 애호박, 양파를 넣어 끓인다. 채소가 익으면 두부와 청양고추를 넣고 "
    "한소끔 더 끓여 마무리한다.",
    "여름에는 오이냉국만 한 게 없다. 오이 1개를 채 썰고, 양파 약간과 미역을 함께 준비한다. 찬물 500ml에 "
    "식초 3큰술, 설탕 1큰술, 국간장 1큰술, 소금 약간을 넣어 국물을 만든다. 재료를 담고 국물을 부은 뒤 "
    "얼음을 띄우고 깨를 뿌리면 시원한 냉국이 완성된다.",
    "떡볶이 양념은 고추장 2큰술, 고춧가루 1큰술, 설탕 1큰술, 간장 1큰술, 물엿 1큰술을 섞어 만든다. 물 400ml에 "
    "양념을 풀어 끓이다가 떡과 어묵을 넣는다. 국물이 걸쭉해질 때까지 저어 가며 졸이고, 마지막에 대파를 넣으면 "
    "된다. 삶은 달걀을 곁들이면 더 든든하다.",
    "잡채를 만들 때는 재료를 따로따로 볶는 것이 중요하다. 시금치는 데쳐서 무치고, 당근과 양파, 버섯은 각각 "
    "볶아 둔다. 당면은 삶아서 간장과 설탕, 참기름으로 밑간을 한다. 마지막으로 모든 재료를 큰 그릇에 담아 "
    "고루 버무리면 색도 곱고 맛도 좋다.",
    "감자전 재료\n감자 3개, 소금 약간, 식용유\n만드는 방법\n1. 감자는 껍질을 벗겨 강판에 간다.\n2. 체에 밭쳐 "
    "물기를 빼고, 가라앉은 전분은 다시 섞는다.\n3. 소금으로 간을 한다.\n4. 달군 팬에 기름을 넉넉히 두르고 "
    "얇게 펴서 앞뒤로 노릇하게 부친다.\n간장에 식초를 조금 섞어 찍어 먹으면 맛있다.",
    "닭볶음탕은 닭을 한 번 데쳐서 쓰면 국물이 훨씬 깔끔해진다. 데친 닭에 감자와 당근을 넣고, 고추장과 "
    "고춧가루, 간장, 다진 마늘로 만든 양념을 넣어 끓인다. 국물이 반으로 졸아들면 양파와 대파를 넣고 10분 "
    "더 끓인다. 매운 걸 좋아하면 청양고추를 추가해도 좋다.",
    "미역국은 생일 아침에 빠지지 않는 음식이다. 불린 미역을 먹기 좋게 자르고, 냄비에 참기름을 둘러 소고기와 "
    "함께 볶는다. 고기 겉면이 익으면 물을 붓고 국간장으로 간을 맞춘다. 약불에서 30분 이상 푹 끓여야 국물이 "
    "진하고 구수해진다.",
    "비빔국수 양념장\n고추장 2큰술, 식초 2큰술, 설탕 1큰술, 간장 반 큰술, 참기름 1큰술, 깨 약간\n소면을 "
    "삶아 찬물에 여러 번 헹궈 물기를 꼭 짠다. 양념장에 비비고 채 썬 오이와 김치, 삶은 달걀 반 개를 올린다. "
    "기호에 따라 설탕과 식초의 양을 조절하면 된다.",
    "두부조림은 반찬이 없을 때 금방 만들 수 있는 메뉴다. 두부를 1센티미터 두께로 썰어 소금을 살짝 뿌리고 "
    "팬에 노릇하게 굽는다. 간장 3큰술, 물 5큰술, 고춧가루 1큰술, 설탕 반 큰술, 다진 파와 마늘로 양념을 "
    "만들어 두부 위에 끼얹고 약불에서 졸인다.",
    "호박죽을 만들려면 먼저 단호박을 전자레인지에 5분 정도 돌려 껍질을 벗기기 쉽게 만든다. 속을 파내고 "
    "잘게 썰어 물과 함께 끓인 뒤 곱게 간다. 찹쌀가루를 물에 개어 조금씩 넣으며 저어 주고, 소금과 설탕으로 "
    "간을 한다. 팥을 삶아 넣으면 더 맛있다.",
]

REVIEWS = [
    "이 블루투스 이어폰을 2주 동안 써 봤습니다. 우선 착용감이 가벼워서 오래 껴도 귀가 아프지 않았어요. 음질은 "
    "가격을 생각하면 충분히 만족스럽고, 특히 저음이 단단한 편입니다. 다만 노이즈 캔슬링은 지하철 안에서 기대만큼 "
    "조용하지는 않았습니다. 배터리는 하루 출퇴근용으로는 넉넉합니다. 별점은 다섯 개 중 네 개 드리겠습니다.",
    "동네에 새로 생긴 칼국숫집에 다녀왔어요. 바지락이 정말 듬뿍 들어 있고 국물이 시원해서 좋았습니다. 면은 "
    "직접 뽑는다고 하던데 쫄깃했어요. 김치가 조금 짠 편이었지만 칼국수랑 먹으니 괜찮았습니다. 점심시간에는 "
    "줄이 길어서 조금 일찍 가시는 걸 추천합니다.",
    "아이 방에 놓으려고 산 책상인데 조립이 생각보다 쉬웠습니다. 설명서가 그림으로 잘 되어 있어서 혼자서도 "
    "40분 만에 끝냈어요. 높이 조절이 돼서 아이가 커도 오래 쓸 수 있을 것 같습니다. 상판에 작은 흠집이 하나 "
    "있었던 점이 아쉬워서 별 하나 뺍니다.",
    "영화 보고 왔는데 기대 이상이었어요. 초반 30분은 조금 지루했지만 중반부터 이야기가 빠르게 전개되면서 "
    "눈을 뗄 수 없었습니다. 주인공의 연기가 정말 좋았고, 특히 마지막 장면에서는 눈물이 났어요. 음악도 장면과 "
    "잘 어울렸습니다. 극장에서 한 번 더 볼 생각입니다.",
    "이 책은 바쁜 직장인을 위한 시간 관리법을 다룹니다. 내용 자체는 새롭지 않지만 구체적인 예시가 많아서 바로 "
    "따라 해 보기 좋았습니다. 특히 하루를 시작하기 전에 가장 중요한 일 세 가지만 적어 보라는 조언이 도움이 "
    "됐어요. 다만 뒤로 갈수록 같은 이야기가 반복되는 느낌이 있습니다.",
    "숙소 위치가 정말 좋았습니다. 역에서 걸어서 5분이고 주변에 식당과 편의점이 많아요. 방은 사진보다 조금 "
    "좁았지만 깨끗했고 침구도 편했습니다. 체크인할 때 직원분이 근처 맛집을 친절하게 알려 주셔서 고마웠어요. "
    "다음에 부산에 오면 또 묵을 생각입니다.",
    "무선 청소기를 바꾼 지 한 달 됐습니다. 흡입력이 세서 카펫에 붙은 강아지 털도 잘 빨아들여요. 먼지통 비우기도 "
    "간편합니다. 다만 무게가 조금 있어서 높은 곳을 청소할 때는 손목이 아프네요. 배터리는 최대 모드로 쓰면 "
    "15분 정도밖에 안 가니 참고하세요.",
    "커피 맛이 진하고 산미가 적어서 제 입맛에 딱 맞았어요. 원두를 갈아 주는 서비스도 있어서 편했습니다. 매장이 "
    "넓진 않지만 조용해서 책 읽기에 좋았고, 직원분들도 친절했어요. 디저트 종류가 조금 더 많았으면 좋겠네요.",
    "공연장 음향이 정말 좋았습니다. 2층 뒷자리였는데도 소리가 또렷하게 들렸어요. 가수분이 중간중간 관객과 "
    "이야기를 나누며 분위기를 이끌어서 세 시간이 금방 지나갔습니다. 다만 공연이 끝나고 주차장을 빠져나가는 데 "
    "40분이나 걸린 건 아쉬웠습니다.",
    "운동화를 한 치수 크게 주문했는데 딱 맞았어요. 발볼이 넓은 편이라 평소 신발을 고르기 어려웠는데 이 제품은 "
    "앞쪽이 넉넉해서 편합니다. 쿠션도 좋아서 하루 종일 걸어도 발이 덜 피곤해요. 색상은 화면에서 본 것보다 "
    "조금 더 어둡습니다.",
    "전기밥솥을 새로 샀는데 밥맛이 확실히 달라졌어요. 잡곡밥 모드로 지으면 현미도 부드럽게 됩니다. 예약 기능이 "
    "있어서 아침에 일어나면 바로 밥을 먹을 수 있어 좋아요. 다만 취사가 끝났을 때 나오는 안내 음성이 좀 커서 "
    "설정에서 줄였습니다.",
    "캠핑 의자는 가볍고 접기 쉬운 게 제일 중요한데, 이 제품은 둘 다 만족합니다. 무게가 1킬로그램 남짓이라 "
    "배낭에 넣어도 부담이 없어요. 앉았을 때 등받이가 낮은 편이라 오래 앉아 있으면 허리가 조금 불편할 수 있습니다.",
]

OPINION = [
    "인공지능이 일자리를 빼앗을 것이라는 걱정이 많다. 하지만 지난 기술 변화를 돌아보면, 기술은 일자리를 "
    "없애기도 했지만 새로운 일자리를 만들기도 했다. 중요한 것은 변화의 속도다. 변화가 너무 빠르면 사람들이 "
    "새로운 기술을 익힐 시간이 부족하다. 그렇기 때문에 정부와 기업은 재교육 기회를 충분히 마련해야 한다.",
    "우리 사회는 여전히 '빨리빨리' 문화에 익숙하다. 덕분에 짧은 시간에 놀라운 성장을 이룬 것도 사실이다. "
    "그러나 속도만 강조하다 보면 안전과 품질을 놓치기 쉽다. 이제는 조금 느리더라도 제대로 하는 것이 더 "
    "가치 있다는 인식이 필요하다.",
    "청년들이 지방을 떠나는 이유는 단순하다. 일자리가 없기 때문이다. 지방 소멸을 막겠다며 여러 지원책이 "
    "나오고 있지만, 좋은 일자리가 없는 한 효과는 제한적일 수밖에 없다. 지역에 기반을 둔 산업을 키우고, 대학과 "
    "기업이 함께 인재를 길러 내는 구조를 만들어야 한다.",
    "독서량이 해마다 줄고 있다는 조사 결과가 나왔다. 스마트폰과 영상 매체가 책의 자리를 차지했기 때문일 것이다. "
    "그렇다고 책의 가치가 사라진 것은 아니다. 긴 글을 읽으며 생각을 정리하는 힘은 짧은 영상으로는 기르기 어렵다. "
    "학교와 도서관이 책 읽는 즐거움을 되살릴 방법을 함께 고민했으면 한다.",
    "일회용 컵 보증금 제도를 두고 논란이 계속되고 있다. 취지에는 대부분 공감하지만, 매장의 부담이 크고 "
    "소비자도 불편하다는 목소리가 많다. 제도가 자리 잡으려면 반납 장소를 늘리고 절차를 간단하게 만드는 것이 "
    "먼저다. 불편을 개인에게만 떠넘겨서는 오래가기 어렵다.",
    "재택근무가 생산성을 떨어뜨린다는 주장과 오히려 높인다는 주장이 맞서고 있다. 결국 일의 성격에 따라 "
    "다르다는 것이 내 생각이다. 집중이 필요한 일은 집에서 더 잘되고, 함께 아이디어를 내야 하는 일은 얼굴을 "
    "마주할 때 더 잘된다. 한 가지 방식을 모두에게 강요하기보다 유연하게 선택할 수 있게 하는 것이 바람직하다.",
    "노키즈존을 둘러싼 논쟁은 결국 서로에 대한 배려의 문제다. 가게 주인에게는 영업의 자유가 있지만, 특정 "
    "집단 전체를 배제하는 것은 차별이 될 수 있다. 부모는 아이가 다른 손님에게 피해를 주지 않도록 신경 쓰고, "
    "사회는 아이를 키우는 가정을 조금 더 너그럽게 바라볼 필요가 있다.",
    "선거 때마다 공약은 넘쳐 나지만 재원 마련 방안은 잘 보이지 않는다. 유권자는 듣기 좋은 약속보다 실현 "
    "가능한 계획을 따져 봐야 한다. 언론도 후보들의 공약을 꼼꼼히 검증해 유권자에게 판단의 근거를 제공해야 한다.",
    "외국어 교육을 언제 시작해야 하는지에 대해서는 의견이 엇갈린다. 일찍 시작할수록 좋다는 주장도 있지만, "
    "모국어의 기초가 탄탄해야 외국어도 잘 배울 수 있다는 연구도 많다. 조급하게 서두르기보다 아이가 흥미를 "
    "잃지 않도록 돕는 것이 더 중요하다고 생각한다.",
    "동네 서점이 하나둘 문을 닫고 있다. 온라인 서점의 할인과 빠른 배송을 따라가기 어렵기 때문이다. 하지만 "
    "동네 서점은 단순히 책을 파는 곳이 아니라 이웃이 만나고 이야기를 나누는 공간이기도 하다. 지역 사회가 "
    "이런 공간을 지킬 방법을 찾아야 한다.",
    "기후 위기는 더 이상 먼 미래의 일이 아니다. 해마다 기록적인 폭염과 폭우가 반복되고 있다. 개인의 실천도 "
    "중요하지만, 에너지 구조를 바꾸는 일은 결국 정부와 기업의 몫이다. 당장의 비용이 부담스럽더라도 지금 "
    "투자하지 않으면 나중에 훨씬 큰 대가를 치르게 될 것이다.",
    "어린이 보호구역에서의 과속 단속을 두고 지나치다는 불만이 나온다. 그러나 단속의 목적은 벌금을 걷는 데 "
    "있지 않고 아이들의 안전을 지키는 데 있다. 불편하더라도 학교 앞에서는 속도를 줄이는 것이 어른의 "
    "당연한 책임이다.",
]

LEGAL = [
    "제1조(목적) 이 조례는 주민의 건강 증진과 쾌적한 생활 환경 조성을 위하여 공원 녹지의 관리에 필요한 사항을 "
    "규정함을 목적으로 한다.\n제2조(정의) 이 조례에서 사용하는 용어의 뜻은 다음과 같다.\n① \"공원\"이란 "
    "구청장이 지정하여 고시한 도시공원을 말한다.\n② \"녹지\"란 공원 외에 수목이 심어진 공공의 토지를 말한다.",
    "제5조(이용자의 의무) ① 공원을 이용하는 사람은 시설을 훼손하거나 다른 이용자에게 불편을 주어서는 아니 "
    "된다.\n② 반려동물과 함께 공원을 이용하는 사람은 목줄을 착용시키고 배설물을 즉시 수거하여야 한다.\n③ "
    "제1항 및 제2항을 위반한 사람에게는 관계 법령에 따라 과태료를 부과할 수 있다.",
    "제12조(계약의 해지) ① 임차인은 계약 기간 중이라도 1개월 전에 서면으로 통지하여 이 계약을 해지할 수 "
    "있다.\n② 임대인은 임차인이 차임을 2기 이상 연체한 경우 계약을 해지할 수 있다.\n③ 계약이 해지된 경우 "
    "임대인은 보증금에서 미지급 차임 등을 공제한 잔액을 임차인에게 반환하여야 한다.",
    "개인정보 수집 및 이용 동의\n1. 수집 항목: 성명, 연락처, 주소\n2. 수집 목적: 행사 참가 신청 접수 및 결과 "
    "안내\n3. 보유 기간: 행사 종료 후 6개월\n위의 개인정보 수집 및 이용에 대한 동의를 거부할 권리가 있습니다. "
    "다만 동의를 거부하시는 경우 행사 참가 신청이 제한될 수 있습니다.",
    "주민등록표 등본 발급 안내\n본인 또는 세대원은 가까운 행정복지센터를 방문하여 등본을 발급받을 수 있습니다. "
    "방문할 때에는 신분증을 반드시 지참하여야 합니다. 정부24 누리집에서도 공동인증서로 로그인한 뒤 무료로 "
    "발급받을 수 있습니다. 대리인이 신청하는 경우에는 위임장과 대리인의 신분증이 필요합니다.",
    "제3조(지원 대상) ① 이 사업의 지원 대상은 공고일 현재 관내에 주민등록을 둔 만 19세 이상 39세 이하의 "
    "청년으로 한다.\n② 다음 각 호의 어느 하나에 해당하는 사람은 지원 대상에서 제외한다.\n1. 같은 목적의 다른 "
    "지원금을 받고 있는 사람\n2. 허위 또는 부정한 방법으로 신청한 사람",
    "□ 추진 배경\n○ 고령 인구 증가에 따라 어르신 돌봄 수요가 꾸준히 늘고 있음\n○ 홀로 사는 어르신의 고립을 "
    "막기 위한 지역 공동체 차원의 지원이 필요함\n□ 주요 내용\n○ 방문 돌봄 인력을 읍면동별로 2명씩 추가 배치함\n"
    "○ 안부 확인 전화를 주 1회에서 주 2회로 늘림",
    "민원 처리 기간 안내\n접수된 민원은 관계 법령에 따라 원칙적으로 7일 이내에 처리합니다. 현장 확인이나 "
    "관계 기관 협의가 필요한 경우에는 처리 기간이 연장될 수 있으며, 이때에는 신청인에게 연장 사유와 처리 예정일을 "
    "알려 드립니다. 처리 결과는 문자 또는 우편으로 통지합니다.",
    "제8조(손해배상) ① 당사자 일방이 이 계약을 위반하여 상대방에게 손해를 입힌 경우에는 그 손해를 배상하여야 "
    "한다.\n② 천재지변이나 그 밖의 불가항력으로 인하여 의무를 이행하지 못한 경우에는 책임을 지지 아니한다.\n"
    "③ 손해배상의 범위에 관하여 다툼이 있는 경우에는 관할 법원의 판단에 따른다.",
    "쓰레기 배출 요령\n생활 쓰레기는 종량제 봉투에 담아 정해진 요일 저녁 8시부터 자정 사이에 내놓아야 합니다. "
    "재활용품은 종류별로 분리하여 투명한 봉투에 담아 주시기 바랍니다. 대형 폐기물은 구청 누리집에서 신고한 뒤 "
    "스티커를 붙여 배출합니다. 무단 투기가 적발되면 과태료가 부과됩니다.",
    "제20조(청문) 구청장은 다음 각 호의 어느 하나에 해당하는 처분을 하려면 청문을 하여야 한다.\n1. 제15조에 "
    "따른 등록의 취소\n2. 제17조에 따른 영업의 정지\n청문의 절차에 관하여는 「행정절차법」에서 정하는 바에 따른다.",
    "장학생 선발 공고\n1. 선발 인원: 30명\n2. 지원 자격: 관내 고등학교에 재학 중인 학생으로서 직전 학기 성적이 "
    "우수한 사람\n3. 제출 서류: 장학금 신청서 1부, 재학 증명서 1부, 성적 증명서 1부\n4. 접수 기간: 3월 4일부터 "
    "3월 15일까지\n서류는 학교를 통해 일괄 제출하여야 하며, 개인 접수는 받지 않습니다.",
]

FORUM = [
    "노트북 배터리가 갑자기 빨리 닳는데 원인이 뭘까요?\n산 지 1년 반 정도 됐고 전에는 6시간은 갔는데 요즘은 "
    "두 시간도 못 버텨요ㅠㅠ 백그라운드 앱도 다 꺼 봤는데 똑같네요. 배터리 교체해야 하는 건지 아시는 분 "
    "계시면 알려 주세요",
    "└ 작업 관리자에서 전원 사용량 높은 프로그램부터 확인해 보세요. 저도 비슷했는데 업데이트가 뒤에서 계속 "
    "돌고 있더라고요. 그래도 안 되면 배터리 성능 보고서를 뽑아 보시면 설계 용량 대비 얼마나 남았는지 나옵니다.",
    "다들 점심 뭐 드셨어요? 저는 회사 앞 분식집에서 라볶이 먹었는데 양이 너무 많아서 반도 못 먹었네요 ㅋㅋ "
    "오후에 회의가 세 개나 있어서 벌써부터 졸려요. 커피 한 잔 더 마시고 버텨 봐야겠습니다.",
    "A: 이번 주말에 뭐 해?\nB: 아직 계획 없어. 너는?\nA: 날씨 좋으면 한강 가서 자전거 타려고. 같이 갈래?\n"
    "B: 좋지! 몇 시에 만날까?\nA: 오후 두 시쯤 여의나루역에서 보자.\nB: 알았어. 늦지 마!",
    "처음으로 혼자 제주도 여행을 가려고 하는데 차 없이도 다닐 만한가요? 버스 노선이 잘 되어 있다고는 들었는데 "
    "배차 간격이 길다는 얘기도 있어서 고민입니다. 3박 4일 일정이고 주로 동쪽 해안을 돌아볼 생각이에요. "
    "경험 있으신 분들 조언 부탁드려요!",
    "└ 동쪽은 201번 버스로 웬만한 곳은 다 갈 수 있어요. 다만 한 시간에 두세 대 정도라 시간표는 꼭 미리 "
    "확인하세요. 저는 성산에서 하루 자고 다음 날 우도 들어갔는데 좋았습니다.",
    "고양이가 밥을 잘 안 먹어서 걱정이에요. 평소에는 사료를 잘 먹던 아이인데 이틀째 반도 안 먹네요. 물은 "
    "조금씩 마시고 화장실도 가긴 하는데, 병원에 바로 데려가야 할까요? 아니면 며칠 더 지켜봐도 될까요?",
    "└ 고양이는 하루 이상 제대로 안 먹으면 간에 무리가 갈 수 있어서 병원 가 보시는 게 좋아요. 별일 아니면 "
    "다행이고요. 저희 애도 그랬는데 구내염이어서 치료받고 금방 나았습니다.",
    "중고로 피아노를 샀는데 조율은 얼마나 자주 해야 하나요? 이사하면서 옮긴 거라 소리가 좀 틀어진 것 같아요. "
    "아이가 이제 막 배우기 시작해서 정확한 음으로 연습했으면 하는데, 조율 비용은 보통 얼마인지도 궁금합니다.",
    "오늘 처음으로 하프 마라톤 완주했습니다! 기록은 2시간 10분으로 좋지 않지만 걷지 않고 끝까지 뛰었다는 게 "
    "너무 뿌듯하네요. 15킬로미터 지점에서 정말 포기하고 싶었는데 옆에서 응원해 주시는 분들 덕분에 버텼어요. "
    "다음 목표는 2시간 안에 들어오는 겁니다 ㅎㅎ",
    "Q. 전세 계약 끝나고 보증금을 아직 못 받았는데 어떻게 해야 하나요?\n집주인이 새 세입자가 들어와야 돌려줄 "
    "수 있다고만 하네요. 이사는 이미 해야 하는 상황이라 너무 답답합니다.\nA. 먼저 임차권 등기명령을 신청하세요. "
    "등기가 끝나면 이사를 가도 대항력과 우선변제권이 유지됩니다.",
    "요즘 아이가 유튜브만 보려고 해서 고민이에요. 초등학교 2학년인데 하루에 두세 시간은 보는 것 같아요. "
    "무조건 못 보게 하면 몰래 볼 것 같고, 그렇다고 그냥 두자니 걱정되네요. 다른 집은 어떻게 규칙을 정하셨는지 "
    "궁금합니다.",
]

SHORT = [
    "오늘은 비가 와서 하루 종일 집에서 책을 읽었다. 오랜만에 조용한 하루였다.",
    "내일 오전 10시에 회의가 있습니다. 자료는 오늘 저녁까지 공유해 주세요.",
    "택배가 예정보다 하루 늦게 도착했지만 포장은 꼼꼼했다. 다음에도 이용할 생각이다.",
    "물은 섭씨 100도에서 끓고 0도에서 언다. 다만 기압이 낮은 높은 산에서는 더 낮은 온도에서 끓는다.",
    "이번 주 금요일은 정기 점검으로 오후 2시부터 4시까지 홈페이지 이용이 중단됩니다. 양해 부탁드립니다.",
    "감기 기운이 있어서 오늘은 일찍 자려고 한다. 따뜻한 꿀물 한 잔 마시고 누워야겠다.",
    "도서관은 매주 월요일과 법정 공휴일에 휴관합니다. 반납은 무인 반납함을 이용해 주세요.",
    "고양이는 하루에 12시간 넘게 잠을 잔다. 그래서 깨어 있을 때는 더 활발하게 놀고 싶어 한다.",
    "새로 산 화분에 물을 너무 많이 줬더니 잎이 노랗게 변했다. 일주일에 한 번만 주기로 했다.",
    "지하철 9호선 급행은 출퇴근 시간에 매우 붐비니 한두 정거장 일찍 나서는 게 좋습니다.",
    "감사합니다. 보내 주신 의견은 다음 호 소식지를 만들 때 꼭 참고하겠습니다.",
    "오늘 점심은 김밥 두 줄로 간단히 해결했다. 그래도 배가 든든하다.",
]

# Clean but unusual: many numbers, emoji, verse without punctuation, a dense schedule.
HARD_CLEAN = [
    "프로야구 주말 경기 결과\n토요일 잠실에서는 LG가 두산을 7대 3으로 꺾었다. 선발 투수는 6이닝 동안 2실점으로 "
    "호투했고, 4번 타자는 3회와 7회에 홈런 두 개를 터뜨렸다. 같은 날 사직에서는 롯데가 KIA에 5대 4로 이겼다. "
    "9회 말 2사 2, 3루에서 나온 끝내기 안타였다. 이로써 롯데는 3연승을 달리며 5위와의 격차를 1.5경기로 좁혔다.",
    "오늘 드디어 자격증 시험 합격 발표 났어요!! 😭😭 세 번째 도전 만에 붙었네요 🎉 퇴근하고 매일 두 시간씩 "
    "공부한 보람이 있어요. 응원해 준 친구들 정말 고마워 💕 이번 주말에는 아무것도 안 하고 푹 쉴 거예요 😴",
    "봄비\n\n창밖에 봄비가 내린다\n오래 닫아 둔 마음에도\n조용히 스며든다\n\n어제의 나는 여기 없고\n젖은 "
    "흙냄새 속에서\n새잎 하나 돋아난다",
    "3월 둘째 주 일정 안내\n월요일 오전 9시 전체 회의, 오후 2시 신입 사원 교육이 있습니다.\n화요일에는 고객사 "
    "방문이 있어 영업팀은 오전 10시까지 본사 1층 로비에 모여 주세요.\n수요일과 목요일은 정기 점검으로 3층 "
    "회의실을 쓸 수 없습니다.\n금요일 오후 5시에는 분기 실적 발표가 있으니 모두 참석해 주시기 바랍니다.",
    "코스피가 외국인 매수세에 힘입어 사흘째 올랐다. 15일 코스피는 전 거래일보다 32.41포인트(1.21%) 오른 "
    "2,714.36에 마감했다. 외국인은 4,210억 원어치를 순매수했고, 기관과 개인은 각각 1,980억 원, 2,350억 원어치를 "
    "순매도했다. 원·달러 환율은 6.2원 내린 1,321.5원에 거래를 마쳤다.",
]

TECH_MIXED = [
    "파이썬에서 리스트를 정렬할 때는 `sorted()` 함수나 `list.sort()` 메서드를 쓴다. 둘의 차이는 원본을 바꾸느냐에 "
    "있다. `sorted()`는 새 리스트를 돌려주고, `sort()`는 원본 리스트를 그 자리에서 정렬한다.\n\n"
    "```python\nnumbers = [3, 1, 2]\nprint(sorted(numbers))  # [1, 2, 3]\nnumbers.sort(reverse=True)\n"
    "print(numbers)  # [3, 2, 1]\n```\n\n정렬 기준을 바꾸고 싶다면 `key` 인자에 함수를 넘기면 된다.",
    "깃에서 마지막 커밋 메시지를 고치고 싶다면 `git commit --amend`를 사용하면 됩니다. 이미 원격 저장소에 "
    "올린 커밋이라면 강제로 푸시해야 하므로, 다른 사람과 함께 쓰는 브랜치에서는 조심해야 합니다. 저는 보통 "
    "개인 브랜치에서만 이 명령을 쓰고, 공유 브랜치에서는 새 커밋을 추가하는 쪽을 택합니다.",
    "도커 컨테이너가 바로 종료되는 문제로 한참 고생했는데, 원인은 간단했다. 컨테이너의 주 프로세스가 "
    "끝나면 컨테이너도 함께 종료되는데, 실행 명령이 백그라운드로 서버를 띄우고 바로 끝나 버렸던 것이다. "
    "서버를 포그라운드로 실행하도록 `CMD`를 고치니 문제가 해결됐다.",
    "SQL에서 `GROUP BY`를 쓸 때 자주 하는 실수는 집계하지 않은 열을 `SELECT`에 넣는 것이다. 예를 들어 "
    "부서별 평균 급여를 구하려면 다음처럼 쓴다.\n\nSELECT department, AVG(salary) AS avg_salary\nFROM employees\n"
    "GROUP BY department;\n\n여기에 직원 이름을 함께 넣으면 어떤 이름을 보여 줘야 할지 알 수 없어서 오류가 난다.",
    "리액트에서 상태를 바꿨는데 화면이 다시 그려지지 않는다면, 객체나 배열을 직접 수정했는지 확인해 보자. "
    "리액트는 이전 값과 새 값을 참조로 비교하기 때문에 같은 배열에 요소를 추가하면 변화를 알아차리지 못한다. "
    "새 배열을 만들어 상태로 넘겨야 한다.",
]

ENGLISH = [
    "The library opened its new reading room on Monday after two years of renovation. Visitors can now borrow "
    "laptops at the front desk, and the children's section has moved to the ground floor, next to the garden. "
    "Staff say the building uses about a third less energy than before, thanks to better insulation and a heat pump.",
    "When you start running, the hardest part is not your legs but your patience. Most beginners go too fast, "
    "get out of breath after ten minutes and decide running is not for them. Slow down until you can still talk "
    "in full sentences. It feels almost too easy at first, but that is exactly the pace that builds endurance.",
    "Sourdough bread needs only flour, water and salt, yet it rewards careful attention. The starter should be "
    "active and bubbly before you mix the dough. Let the dough rest, fold it a few times during the first hours, "
    "and give it a long, cool proof overnight. The crust will be darker and the crumb more open than you expect.",
    "The committee reviewed three proposals for the new bus routes. The first would extend the existing line to "
    "the hospital, the second would add a night service on weekends, and the third would replace two routes with a "
    "single, more frequent one. After a long discussion, members agreed to hold a public consultation in March.",
    "Photosynthesis is the process by which plants, algae and some bacteria turn light energy into chemical energy. "
    "Carbon dioxide and water are combined to form glucose, and oxygen is released as a by-product. Almost all life "
    "on Earth depends on it, directly or indirectly.",
    "I finally fixed the squeaky door in the hallway. It turned out the hinge pins were dry and slightly bent. A "
    "bit of oil and a few taps with a hammer, and it is silent again. Small repairs like this are oddly satisfying, "
    "and I keep wondering why I waited three months to do it.",
    "Version 2.4 of the app brings offline maps, a redesigned settings page and faster start-up on older phones. "
    "We also fixed a bug that could make notifications arrive twice. Thanks to everyone who reported problems in "
    "the beta; your feedback shaped most of the changes in this release.",
    "Good documentation answers three questions quickly: what does this do, how do I start, and where do I go when "
    "something breaks? Everything else can wait. A short example that runs as written is worth more than pages of "
    "reference material that nobody reads.",
    "The river rose nearly two metres overnight after heavy rain in the hills. Several roads near the old bridge were "
    "closed, and residents of low-lying streets were asked to move their cars. By the afternoon the water had begun "
    "to fall, and officials expect the roads to reopen tomorrow.",
    "My grandmother kept a notebook of recipes that she never followed exactly. Every page has crossed-out amounts, "
    "notes in the margin and small drawings of cakes. Reading it now feels less like cooking instructions and more "
    "like a diary of forty years of family dinners.",
]

CODE = [
    "import json\nfrom pathlib import Path\n\n\ndef load_config(path: str) -> dict:\n    \"\"\"Read a JSON config "
    "file and fill in defaults.\"\"\"\n    data = json.loads(Path(path).read_text())\n    data.setdefault(\"batch_size\", "
    "32)\n    data.setdefault(\"learning_rate\", 3e-4)\n    return data\n\n\nif __name__ == \"__main__\":\n    config = "
    "load_config(\"config.json\")\n    print(config)\n",
    "#include <stdio.h>\n\nint main(void) {\n    int sum = 0;\n    for (int i = 1; i <= 100; i++) {\n        if (i % 3 "
    "== 0 || i % 5 == 0) {\n            sum += i;\n        }\n    }\n    printf(\"%d\\n\", sum);\n    return 0;\n}\n",
    "function debounce(fn, waitMs) {\n  let timer = null;\n  return function (...args) {\n    clearTimeout(timer);\n"
    "    timer = setTimeout(() => fn.apply(this, args), waitMs);\n  };\n}\n\nconst onResize = debounce(() => {\n  "
    "console.log(window.innerWidth, window.innerHeight);\n}, 200);\nwindow.addEventListener(\"resize\", onResize);\n",
    "class Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, item):\n        "
    "self._items.append(item)\n\n    def pop(self):\n        if not self._items:\n            raise IndexError(\"pop "
    "from empty stack\")\n        return self._items.pop()\n\n    def peek(self):\n        if not self._items:\n      "
    "      return None\n        return self._items[-1]\n\n    def __len__(self):\n        return len(self._items)\n",
    "SELECT c.name, COUNT(o.id) AS orders, SUM(o.total) AS revenue\nFROM customers AS c\nJOIN orders AS o ON o.customer_id"
    " = c.id\nWHERE o.created_at >= '2024-01-01'\nGROUP BY c.name\nHAVING COUNT(o.id) > 5\nORDER BY revenue DESC\n"
    "LIMIT 20;\n",
    "#!/usr/bin/env bash\nset -euo pipefail\n\nBACKUP_DIR=${BACKUP_DIR:-/var/backups/app}\nmkdir -p \"$BACKUP_DIR\"\n"
    "stamp=$(date +%Y%m%d-%H%M%S)\ntar -czf \"$BACKUP_DIR/app-$stamp.tar.gz\" /srv/app/data\nfind \"$BACKUP_DIR\" "
    "-name 'app-*.tar.gz' -mtime +14 -delete\necho \"backup written: $BACKUP_DIR/app-$stamp.tar.gz\"\n",
    "package main\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\nfunc wordCount(text string) map[string]int {\n\tcounts "
    ":= make(map[string]int)\n\tfor _, word := range strings.Fields(text) {\n\t\tcounts[strings.ToLower(word)]++\n\t}\n"
    "\treturn counts\n}\n\nfunc main() {\n\tfmt.Println(wordCount(\"the cat and the hat\"))\n}\n",
    "use std::collections::HashMap;\n\nfn main() {\n    let mut scores: HashMap<&str, u32> = HashMap::new();\n    "
    "scores.insert(\"alice\", 90);\n    scores.insert(\"bob\", 72);\n    for (name, score) in &scores {\n        "
    "if *score >= 80 {\n            println!(\"{name} passed with {score}\");\n        } else {\n            "
    "println!(\"{name} needs another try\");\n        }\n    }\n}\n",
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>Contact</title>\n</head>\n"
    "<body>\n  <form action=\"/contact\" method=\"post\">\n    <label for=\"email\">Email</label>\n    <input "
    "id=\"email\" name=\"email\" type=\"email\" required>\n    <textarea name=\"message\" rows=\"5\"></textarea>\n"
    "    <button type=\"submit\">Send</button>\n  </form>\n</body>\n</html>\n",
    "def test_tokenizer_roundtrip(tokenizer):\n    texts = [\"hello world\", \"안녕하세요\", \"\"]\n    for text in "
    "texts:\n        ids = tokenizer.encode(text)\n        assert tokenizer.decode(ids) == text\n\n\ndef "
    "test_batch_matches_single(tokenizer):\n    texts = [\"a b c\", \"d e\"]\n    batch = tokenizer.encode_batch(texts)"
    "\n    assert batch == [tokenizer.encode(text) for text in texts]\n",
]

GENRES = {"news": NEWS, "encyclopedia": ENCYCLOPEDIA, "daily": DAILY, "recipe": RECIPES, "review": REVIEWS,
          "opinion": OPINION, "legal": LEGAL, "forum": FORUM}


def clean_documents(rng: random.Random) -> list[tuple[str, str]]:
    """Every paragraph alone, then longer same-genre documents of 4-12 paragraphs (~1-3k chars)."""
    documents = [(genre, text) for genre, paragraphs in GENRES.items() for text in paragraphs]
    documents += [("short", text) for text in SHORT]
    documents += [("tech_mixed", text) for text in TECH_MIXED]
    documents += [("hard_clean", text) for text in HARD_CLEAN]
    documents += [("english", text) for text in ENGLISH]
    documents += [("code", text) for text in CODE]
    for genre, paragraphs in GENRES.items():
        for _ in range(6):
            chosen = rng.sample(paragraphs, rng.randint(4, 12))
            documents.append((genre + "_long", "\n\n".join(chosen)))
    documents.append(("english_long", "\n\n".join(ENGLISH)))
    documents.append(("code_long", "\n\n".join(CODE[:4])))
    return documents


# ---------------------------------------------------------------------------------------------------
# Junk generators: each returns one document; `rng` makes the sample reproducible.

MENU_WORDS = ["홈", "회사소개", "인사말", "연혁", "오시는 길", "제품소개", "신제품", "고객센터", "공지사항",
              "자주 묻는 질문", "1:1 문의", "이벤트", "커뮤니티", "자유게시판", "포토갤러리", "사이트맵",
              "로그인", "회원가입", "마이페이지", "장바구니", "주문조회", "배송조회", "쇼핑하기", "베스트",
              "신상품", "할인상품", "브랜드", "매장안내", "채용정보", "뉴스", "정치", "경제", "사회", "문화",
              "스포츠", "연예", "오피니언", "포토", "영상", "전체메뉴", "검색", "더보기", "이전", "다음", "목록",
              "바로가기", "TOP", "English", "中文", "닫기", "메뉴 열기", "본문 바로가기"]
KEYWORDS = ["맛집", "카페", "숙소", "펜션", "호텔", "렌터카", "치과", "피부과", "성형외과", "이사업체",
            "인테리어", "꽃집", "학원", "과외", "중고차", "대출", "보험", "다이어트", "탈모", "임플란트"]
PLACES = ["강남", "홍대", "신촌", "잠실", "부산", "해운대", "대구", "대전", "광주", "제주", "수원", "인천",
          "일산", "분당", "판교", "천안", "전주", "여수", "강릉", "속초"]
SPAM_TERMS = ["카지노사이트", "바카라사이트", "토토사이트", "안전놀이터", "메이저놀이터", "먹튀검증", "스포츠토토",
              "온라인카지노", "슬롯사이트", "파워볼", "실시간바카라", "꽁머니", "첫충 30%", "매충 10%",
              "무제한 환전", "가입머니 지급", "VIP 혜택", "24시간 상담"]
ADULT_TERMS = ["출장마사지", "출장안마", "조건만남", "성인용품", "무료성인", "야한동영상", "19금", "후불제",
               "100% 후불", "실사 인증", "최고 미녀", "즉시 출발"]
EMOJI = ["🔥", "💰", "🎰", "✨", "💯", "👉", "⭐", "❤️", "🎁", "📢", "✅", "🚀", "💎", "😍", "👍"]
SYMBOLS = ["★", "☆", "♥", "♡", "■", "□", "▶", "◀", "◆", "◇", "●", "○", "※", "→", "♣", "♠", "▲", "▼", "━", "═"]
COMMON_SYLLABLES = "이다는가에의을를하고서로도한지기리사자수정대인시부아나어주전국일상보장해게었습니니다요"


def menu(rng):
    words = rng.sample(MENU_WORDS, rng.randint(12, 35))
    separator = rng.choice(["\n", " | ", " · ", "  ", " > ", "\n- "])
    return separator.join(words)


def keyword_stuffing(rng):
    keyword = rng.choice(KEYWORDS)
    places = rng.sample(PLACES, rng.randint(8, 18))
    phrases = [f"{place} {keyword}" for place in places] + [f"{place}{keyword} 추천" for place in places[:6]]
    rng.shuffle(phrases)
    tail = f" {keyword} 추천 {keyword} 가격 {keyword} 후기 {keyword} 순위 {keyword} 비교"
    style = rng.random()
    if style < 0.4:
        return ", ".join(phrases) + tail
    if style < 0.7:
        return "\n".join(f"#{phrase.replace(' ', '')}" for phrase in phrases) + "\n" + tail.strip()
    intro = f"{rng.choice(places)} {keyword} 찾으시나요? 최고의 {keyword}을 소개합니다."
    return intro + "\n" + " ".join(phrases) + tail + tail


def gambling_spam(rng):
    site = rng.choice(["bet", "casino", "toto", "slot", "win"]) + str(rng.randint(10, 999))
    url = f"https://{site}.{rng.choice(['com', 'net', 'xyz', 'top', 'kr'])}"
    terms = rng.sample(SPAM_TERMS, rng.randint(6, 12))
    parts = []
    for term in terms:
        pieces = [rng.choice(EMOJI), term]
        if rng.random() < 0.5:
            pieces.append(rng.choice(["✔️ 안전", "★ 추천", "▶ 바로가기", "◆ 인증업체", "[검증완료]"]))
        parts.append(" ".join(pieces))
    lines = [f"{rng.choice(EMOJI)} {rng.choice(SPAM_TERMS)} 1위 {rng.choice(EMOJI)}", url] + parts
    lines.append(f"{rng.choice(SPAM_TERMS)} {rng.choice(SPAM_TERMS)} {rng.choice(SPAM_TERMS)} 문의 텔레그램 @{site}")
    lines.append(url)
    if rng.random() < 0.5:
        lines += [lines[2], lines[3], url]
    return "\n".join(lines)


def adult_spam(rng):
    phone = f"010-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}"
    regions = rng.sample(PLACES, rng.randint(6, 12))
    terms = rng.sample(ADULT_TERMS, 6)
    lines = [f"{rng.choice(SYMBOLS)}{rng.choice(SYMBOLS)} {terms[0]} {terms[1]} {rng.choice(SYMBOLS)}{rng.choice(SYMBOLS)}",
             f"☎ {phone} ☎"]
    lines += [f"{region}{terms[2]} {region}{terms[3]} {region}{terms[4]}" for region in regions]
    lines += [f"{rng.choice(EMOJI)} {terms[5]} {phone} {rng.choice(EMOJI)}"] * rng.randint(1, 3)
    return "\n".join(lines)


def seo_spam(rng):
    keyword = rng.choice(SPAM_TERMS[:8])
    other = rng.choice(SPAM_TERMS[:8])
    sentence = (f"{keyword} 추천 순위를 알려 드립니다. {keyword} 먹튀 없는 {keyword}만 모았습니다. "
                f"{keyword} 가입 방법과 {keyword} 이벤트를 확인하세요. {other} {keyword} 비교 {keyword} 후기. ")
    return sentence * rng.randint(3, 6) + f"\nhttps://{rng.randint(100, 999)}{keyword[:2]}.com"


def salad_uniform(rng):
    words = ["".join(chr(0xAC00 + rng.randrange(11172)) for _ in range(rng.randint(1, 4)))
             for _ in range(rng.randint(60, 300))]
    return _sentences(rng, words)


def salad_common(rng):
    words = ["".join(rng.choice(COMMON_SYLLABLES) for _ in range(rng.randint(1, 4)))
             for _ in range(rng.randint(60, 300))]
    return _sentences(rng, words)


def _sentences(rng, words):
    """Join words with spaces and a period every 5-12 words, so the salad looks like prose at a glance."""
    out, count = [], 0
    for word in words:
        count += 1
        if count >= rng.randint(5, 12):
            out.append(word + ".")
            count = 0
        else:
            out.append(word)
    return " ".join(out)


def symbol_lines(rng):
    lines = []
    for _ in range(rng.randint(5, 20)):
        kind = rng.random()
        if kind < 0.4:
            lines.append("".join(rng.choice(SYMBOLS) for _ in range(rng.randint(10, 40))))
        elif kind < 0.7:
            lines.append(" ".join(rng.choice(EMOJI) * rng.randint(1, 4) for _ in range(rng.randint(4, 10))))
        else:
            word = rng.choice(["대박", "이벤트", "특가", "오픈", "축하", "감사"])
            lines.append(f"{rng.choice(SYMBOLS) * 3} {word} {rng.choice(SYMBOLS) * 3} {rng.choice(EMOJI) * 3}")
    return "\n".join(lines)


def boilerplate(rng):
    company = rng.choice(["(주)한빛소프트웨어", "주식회사 다온", "푸른나무 출판사", "㈜새봄유통", "미래교육원"])
    options = [
        "이 웹사이트는 이용자의 편의를 위해 쿠키를 사용합니다. 사이트를 계속 이용하시면 쿠키 사용에 동의하는 것으로 "
        "간주됩니다. 자세한 내용은 개인정보처리방침을 확인하세요.\n동의   거부   쿠키 설정",
        f"회사소개 | 이용약관 | 개인정보처리방침 | 이메일무단수집거부 | 고객센터\n상호: {company} | 대표: 김민수 | "
        f"사업자등록번호: {rng.randint(100, 999)}-{rng.randint(10, 99)}-{rng.randint(10000, 99999)}\n"
        f"통신판매업신고: 제2024-서울강남-{rng.randint(1000, 9999)}호 | 주소: 서울특별시 강남구 테헤란로 {rng.randint(1, 500)}\n"
        f"Copyright © {rng.randint(2015, 2025)} {company}. All rights reserved.",
        "로그인 회원가입 아이디/비밀번호 찾기\n아이디 저장  자동 로그인\n회원이 아니신가요? 회원가입\n"
        "SNS 계정으로 로그인\n비밀번호 찾기 | 아이디 찾기",
        f"ⓒ {company} 무단 전재 및 재배포 금지\n기사제보 및 보도자료 news@example.com\n"
        f"Copyright (c) {company}. All rights reserved.",
        "이 사이트의 모든 기능을 사용하려면 자바스크립트를 활성화해 주세요. 브라우저 설정에서 JavaScript를 "
        "활성화한 뒤 새로고침 하세요.\n쿠키 설정을 확인해 주세요.",
        "본 사이트는 쿠키를 사용합니다. 쿠키 정책을 확인하시고 동의해 주세요.\n필수 쿠키만 허용  모두 허용\n"
        "개인정보 처리방침 | 이용약관",
    ]
    return options[rng.randrange(len(options))]


def repeated_lines(rng):
    line = rng.choice([
        "지금 바로 상담 신청하세요! 무료 견적을 보내 드립니다.",
        "이 글은 비밀글입니다.",
        "삭제된 댓글입니다.",
        "관리자에 의해 블라인드 처리된 게시물입니다.",
        "새 글이 등록되었습니다. 확인해 주세요.",
        "오늘의 특가 상품을 확인하세요 최대 70% 할인",
        "좋아요 구독 알림설정 부탁드립니다",
    ])
    lines = [line] * rng.randint(4, 15)
    if rng.random() < 0.5:
        lines.insert(rng.randrange(len(lines)), rng.choice(SHORT))
    return "\n".join(lines)


def fragment(rng):
    return rng.choice([
        "더보기", "이전글 다음글 목록", "댓글 0 | 공감 3", "Posted by 관리자", "작성자 : 운영자 | 조회 : 152",
        "목록으로", "TOP ▲", "1 2 3 4 5 다음", "공유하기 | 신고하기", "사진 출처: 연합뉴스", "[광고]",
        "오늘 방문자 152 | 전체 방문자 30,211", "이 게시물을 공유합니다",
        "이전글 | 봄맞이 할인 안내\n다음글 | 여름 휴가 일정 공지", "태그: #일상 #맛집 #주말",
    ])


def number_table(rng):
    years = list(range(rng.randint(2010, 2018), 2025))
    header = "구분\t" + "\t".join(str(year) for year in years)
    rows = [header]
    for label in rng.sample(["매출액", "영업이익", "순이익", "자산총계", "부채총계", "자본총계", "인원", "점포수"], 5):
        rows.append(label + "\t" + "\t".join(f"{rng.randint(100, 99999):,}" for _ in years))
    if rng.random() < 0.5:
        rows += [f"{rng.randint(1, 31)}.{rng.randint(1, 12)}\t{rng.uniform(0, 100):.2f}\t{rng.uniform(0, 100):.2f}"
                 for _ in range(10)]
    return "\n".join(rows)


def url_list(rng):
    domains = ["example.com", "blog.example.kr", "shop.example.net", "news.example.org", "cafe.example.co.kr"]
    lines = []
    for _ in range(rng.randint(6, 25)):
        path = "/".join(str(rng.randint(1, 99999)) for _ in range(rng.randint(1, 3)))
        url = f"https://{rng.choice(domains)}/{path}?ref={rng.randint(1, 999)}"
        lines.append(url if rng.random() < 0.6 else f"{rng.choice(['링크', '바로가기', '출처'])}: {url}")
    return "\n".join(lines)


def lorem_ipsum(rng):
    latin = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et "
             "dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip "
             "ex ea commodo consequat.")
    korean_filler = "여기에 내용을 입력하세요. 제목을 입력하세요. 텍스트를 입력하세요. 이곳에 설명이 들어갑니다."
    style = rng.random()
    if style < 0.5:
        return (latin + "\n\n") * rng.randint(1, 3) + "Duis aute irure dolor in reprehenderit in voluptate."
    if style < 0.75:
        return "\n".join([korean_filler] * rng.randint(3, 6))
    return f"제목을 입력하세요\n{latin}\n샘플 텍스트입니다. 샘플 텍스트입니다. 샘플 텍스트입니다."


def ad_copy(rng):
    """Grammatical advertising copy: the kind of junk these heuristics are not built to catch."""
    term = rng.choice(SPAM_TERMS[:8])
    name = rng.choice(["럭키", "골드", "다이아", "에이스", "제우스"]) + rng.choice(["벳", "카지노", "토토"])
    return (f"{name}는 10년 동안 한 번도 사고가 없었던 {term}입니다. 지금 가입하시면 첫 충전 금액의 30%를 "
            f"보너스로 드리고, 환전은 언제든지 5분 안에 처리해 드립니다. 고객센터는 24시간 운영되며 친절한 상담원이 "
            f"기다리고 있습니다. 더 자세한 내용은 텔레그램 @{name}{rng.randint(1, 99)}로 문의해 주세요.")


def shuffled_words(rng):
    """Real Korean words in random order: every word and particle is fine, the sentences are not."""
    words = " ".join(rng.sample(NEWS + DAILY + OPINION, 4)).split()
    rng.shuffle(words)
    return " ".join(words)


JUNK_KINDS = {
    "menu": menu, "keyword_stuffing": keyword_stuffing, "gambling_spam": gambling_spam, "adult_spam": adult_spam,
    "seo_spam": seo_spam, "salad_uniform": salad_uniform, "salad_common": salad_common,
    "symbol_lines": symbol_lines, "boilerplate": boilerplate, "repeated_lines": repeated_lines,
    "fragment": fragment, "number_table": number_table, "url_list": url_list, "lorem_ipsum": lorem_ipsum,
}
HARD_JUNK_KINDS = {"ad_copy": ad_copy, "shuffled_words": shuffled_words}
JUNK_PER_KIND = 12
HARD_JUNK_PER_KIND = 3


def main() -> None:
    rng = random.Random(20240917)
    records = [{"label": "clean", "kind": kind, "text": text} for kind, text in clean_documents(rng)]
    kinds = [(kind, generate, JUNK_PER_KIND) for kind, generate in JUNK_KINDS.items()]
    kinds += [(kind, generate, HARD_JUNK_PER_KIND) for kind, generate in HARD_JUNK_KINDS.items()]
    for kind, generate, wanted in kinds:
        made, attempts = set(), 0
        while len(made) < wanted and attempts < 200:  # skip exact repeats: the pipeline dedups those
            attempts += 1
            text = generate(rng)
            if text not in made:
                made.add(text)
                records.append({"label": "junk", "kind": kind, "text": text})
    with open(OUTPUT, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    labels = [record["label"] for record in records]
    print(f"wrote {OUTPUT}: {labels.count('clean')} clean, {labels.count('junk')} junk")


if __name__ == "__main__":
    main()
